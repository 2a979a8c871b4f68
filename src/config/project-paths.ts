import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Where Sluice's own files live. Code runs from `src/` (tsx, vitest) and from `dist/src/` (built), so
 * the package root is found by walking up to the package.json named "sluice" rather than by a fixed
 * number of `..`.
 */
let cachedRoot: string | undefined;

export function packageRoot(): string {
  if (cachedRoot) return cachedRoot;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest)) {
      const parsed = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string };
      if (parsed.name === "sluice") {
        cachedRoot = dir;
        return dir;
      }
    }
    const parent = dirname(dir);
    if (parent === dir)
      throw new Error(`cannot locate Sluice's package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}

export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as {
    version: string;
  };
  return manifest.version;
}
