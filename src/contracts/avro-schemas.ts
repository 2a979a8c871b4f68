import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import avro, { type Schema, type Type } from "avsc";

/**
 * Loads the `.avsc` contracts from `schemas/` (the source of truth, docs/design.md §4). The package root is
 * found by walking up from this file to the first directory holding `package.json`, so the same code
 * works from `src/contracts/` (vitest, tsx) and from `dist/src/contracts/` (built package).
 */
export type SchemaName = "inference-request" | "inference-result" | "freshness-heartbeat";

let cachedRoot: string | undefined;
const cachedTypes = new Map<SchemaName, Type>();

export function packageRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, "package.json"))) {
      cachedRoot = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) {
      throw new Error(
        `Cannot find the Sluice package root (a directory with package.json) above ${fileURLToPath(import.meta.url)}; reinstall the package`,
      );
    }
    dir = parent;
  }
}

export function schemaPath(name: SchemaName): string {
  return join(packageRoot(), "schemas", `${name}.avsc`);
}

/** Parsed schema JSON (useful for docs and compatibility checks). */
export function loadSchema(name: SchemaName): Schema {
  return JSON.parse(readFileSync(schemaPath(name), "utf8")) as Schema;
}

/** Compiled avsc type, cached per schema. Unions of null + one type decode unwrapped (`wrapUnions: "auto"`). */
export function avroType(name: SchemaName): Type {
  let type = cachedTypes.get(name);
  if (type === undefined) {
    type = avro.Type.forSchema(loadSchema(name), { wrapUnions: "auto" });
    cachedTypes.set(name, type);
  }
  return type;
}
