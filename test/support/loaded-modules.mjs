/**
 * `node --import ./test/support/loaded-modules.mjs …` with SLUICE_TEST_LOADED_MODULES=<file>: the
 * process appends the URL of every module it loads to <file>, one a line. ES modules are seen by a
 * resolve hook as they are imported; CommonJS files (what a package requires inside itself) are
 * taken from require's cache at exit, and native addons (`.node`, also those a worker thread loaded:
 * onnxruntime runs in workers) from the process's memory map where Linux has one. Plain JavaScript,
 * so a process runs it without a TypeScript loader; test/e2e/cli-lazy-load.test.ts uses it to see
 * what a command loads.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire, register } from "node:module";
import { pathToFileURL } from "node:url";
import { isMainThread } from "node:worker_threads";

let out = process.env["SLUICE_TEST_LOADED_MODULES"];

// This file is also the hooks module: register() loads it again on the loader's own thread.
if (isMainThread && out) {
  const file = out;
  writeFileSync(file, "");
  register(import.meta.url, { data: { out: file } });
  const cache = createRequire(import.meta.url).cache;
  process.on("exit", () => {
    const maps = existsSync("/proc/self/maps") ? readFileSync("/proc/self/maps", "utf8") : "";
    const addons = maps.split("\n").flatMap((line) => /\s(\/\S+\.node)$/.exec(line)?.[1] ?? []);
    const urls = [...Object.keys(cache), ...new Set(addons)].map((path) => `${pathToFileURL(path).href}\n`);
    appendFileSync(file, urls.join(""));
  });
}

/** Hook: receives the file from register(). */
export function initialize(data) {
  out = data.out;
}

/** Hook: records each resolved module, then resolves as usual. */
export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (out) appendFileSync(out, `${resolved.url}\n`);
  return resolved;
}
