import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { sluiceConfigSchema } from "../../../src/config/config-schema.js";
import { envNameFor } from "../../../src/config/env-overrides.js";
import { packageRoot } from "../../../src/config/project-paths.js";

type Node = {
  _zod: { def: { type: string; innerType?: Node; shape?: Record<string, Node>; options?: Node[] } };
};

/** The object shape of a key, looking through wrappers and into unions (`kafka.ssl`: true or an object). */
function shapeOf(node: Node): Record<string, Node> | undefined {
  let inner: Node | undefined = node;
  while (inner && inner._zod.def.type !== "object") {
    if (inner._zod.def.type === "union") return inner._zod.def.options?.map(shapeOf).find(Boolean);
    inner = inner._zod.def.innerType;
  }
  return inner?._zod.def.shape;
}

/** Every dotted key below the sections, with its schema (objects such as kafka.sasl included). */
function schemaKeys(node: Node, prefix = ""): Map<string, Node> {
  const out = new Map<string, Node>();
  for (const [key, child] of Object.entries(shapeOf(node) ?? {})) {
    const dotted = `${prefix}${key}`;
    if (prefix !== "") out.set(dotted, child);
    if (shapeOf(child)) for (const [k, v] of schemaKeys(child, `${dotted}.`)) out.set(k, v);
  }
  return out;
}

interface Row {
  key: string;
  cells: string[];
}

/** Rows of the markdown tables after `fromHeading` whose first cell is a backticked key. */
function keyRows(markdown: string, fromHeading: RegExp): Row[] {
  const start = markdown.search(fromHeading);
  expect(start, `heading ${fromHeading} not found`).toBeGreaterThanOrEqual(0);
  const rows: Row[] = [];
  for (const line of markdown.slice(start).split("\n")) {
    if (/^## /.test(line) && rows.length > 0) break; // the next top-level section ends the reference
    const cells = line
      .split(/(?<!\\)\|/)
      .slice(1, -1)
      .map((c) => c.trim());
    const key = /^`([a-zA-Z]+\.[a-zA-Z.]+)`$/.exec(cells[0] ?? "")?.[1];
    if (key) rows.push({ key, cells });
  }
  return rows;
}

const schema = schemaKeys(sluiceConfigSchema as unknown as Node);
const isObject = (key: string) => [...schema.keys()].some((other) => other.startsWith(`${key}.`));

/** A union key (`kafka.ssl`: true or an object) is one environment variable holding JSON. */
function isUnion(key: string): boolean {
  let node: Node | undefined = schema.get(key);
  while (node && node._zod.def.type !== "union" && node._zod.def.innerType) node = node._zod.def.innerType;
  return node?._zod.def.type === "union";
}
const parentOf = (key: string) => key.slice(0, key.lastIndexOf("."));

/**
 * What the environment-variable column says: a key's variable, — for objects. A union (`kafka.ssl`)
 * has its own variable, and so has each key of its object form (`SLUICE_KAFKA__SSL__CA_PATH`).
 */
function documentedEnv(key: string): string {
  if (isUnion(key)) return `\`${envNameFor(key)}\``;
  return isObject(key) ? "—" : `\`${envNameFor(key)}\``;
}

/** The default as the docs write it: `JSON`, (unset) for optional keys, — for sub-keys of an optional object. */
function documentedDefault(key: string): string {
  const parsed = (schema.get(key) as unknown as z.ZodType).safeParse(undefined);
  if (!parsed.success || parsed.data === undefined)
    return key.split(".").length > 2 && !isUnion(parentOf(key)) ? "—" : "(unset)";
  if (key === "observability.instanceId") return "hostname-pid"; // computed per process
  return `\`${JSON.stringify(parsed.data)}\``;
}

/** Failure text that names the keys, so whoever merges a branch with new keys sees which rows to add. */
function difference(label: string, keys: string[]): string {
  return keys.length === 0 ? "" : `${label}: ${keys.join(", ")}`;
}

describe("the configuration reference matches the schema", () => {
  const doc = readFileSync(join(packageRoot(), "docs", "configuration.md"), "utf8");
  const rows = keyRows(doc, /^## Reference/m);
  it("finds the reference tables", () => expect(rows.length).toBeGreaterThan(50));

  it("docs/configuration.md has one row per schema key, and no row for a key the schema lacks", () => {
    expect(schema.size).toBeGreaterThan(50);
    const documented = new Set(rows.map((r) => r.key));
    const missing = [...schema.keys()].filter((k) => !documented.has(k));
    const extra = [...documented].filter((k) => !schema.has(k));
    expect(
      [
        difference("keys in the schema without a row in docs/configuration.md", missing),
        difference("rows in docs/configuration.md for keys the schema does not have", extra),
      ]
        .filter(Boolean)
        .join("\n"),
    ).toBe("");
  });

  it("each row shows the key's default and environment variable", () => {
    const wrong = rows
      .filter((r) => schema.has(r.key))
      .flatMap((r) => {
        const env = documentedEnv(r.key);
        const problems: string[] = [];
        if (r.cells[1] !== documentedDefault(r.key))
          problems.push(`${r.key}: default ${r.cells[1]}, schema ${documentedDefault(r.key)}`);
        if (r.cells[2] !== env)
          problems.push(`${r.key}: environment variable ${r.cells[2]}, expected ${env}`);
        return problems;
      });
    expect(wrong.join("\n")).toBe("");
  });

  it("the README's configuration tables list the same keys and defaults (sub-keys of kafka.sasl folded)", () => {
    const readme = readFileSync(join(packageRoot(), "README.md"), "utf8");
    const readmeRows = keyRows(readme, /^## Configuration/m);
    const listed = new Set(readmeRows.map((r) => r.key));
    const folded = (k: string) => k.split(".").length > 2; // described inside their object's row
    const missing = [...schema.keys()].filter((k) => !folded(k) && !listed.has(k));
    const extra = [...listed].filter((k) => !schema.has(k));
    const wrongDefaults = readmeRows
      .filter((r) => schema.has(r.key) && r.cells[1] !== documentedDefault(r.key))
      .map((r) => `${r.key}: default ${r.cells[1]}, schema ${documentedDefault(r.key)}`);
    expect(
      [
        difference("keys in the schema without a row in README.md", missing),
        difference("rows in README.md for keys the schema does not have", extra),
        ...wrongDefaults,
      ]
        .filter(Boolean)
        .join("\n"),
    ).toBe("");
  });
});
