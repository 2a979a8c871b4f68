import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { packageRoot } from "../../src/config/project-paths.js";

/**
 * The `sluice` CLI as tests run it: the built `dist/src/cli/main.js` under plain `node`, as users run
 * it (`bin/sluice.js` imports the same file). A TypeScript loader in every child (`--import tsx`)
 * costs each CLI process its startup and transpiling again; the global setups build `dist/` once per
 * run instead (`buildDist`), so a test never runs a stale build.
 */
export function builtCli(): string {
  const main = join(packageRoot(), "dist", "src", "cli", "main.js");
  if (!existsSync(main)) throw new Error(`${main} is missing: the vitest global setup builds it (buildDist)`);
  return main;
}

/**
 * `npm run build` without its type check (`tsc --noCheck`: the same files, a few seconds instead of a
 * full check; `npm run typecheck` checks the types in `npm test`). Called by the global setups when
 * the run has a test that starts the CLI.
 */
export async function buildDist(): Promise<void> {
  const started = Date.now();
  const tsc = join(packageRoot(), "node_modules", "typescript", "bin", "tsc");
  const child = spawn(process.execPath, [tsc, "-p", "tsconfig.build.json", "--noCheck"], {
    cwd: packageRoot(),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    output += d.toString();
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", resolve);
  });
  if (code !== 0) throw new Error(`building dist/ (tsc -p tsconfig.build.json --noCheck) failed:\n${output}`);
  console.log(`[test build] dist/ built in ${Date.now() - started} ms`);
}
