import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sluiceConfigSchema } from "../../../src/config/config-schema.js";
import { envNameFor } from "../../../src/config/env-overrides.js";
import { packageRoot } from "../../../src/config/project-paths.js";

type Node = { _zod: { def: { type: string; innerType?: Node; shape?: Record<string, Node> } } };

function shapeOf(node: Node): Record<string, Node> | undefined {
  let inner: Node | undefined = node;
  while (inner && inner._zod.def.type !== "object") inner = inner._zod.def.innerType;
  return inner?._zod.def.shape;
}

function keys(node: Node, prefix = ""): string[] {
  return Object.entries(shapeOf(node) ?? {}).flatMap(([key, child]) => {
    const dotted = `${prefix}${key}`;
    const nested = shapeOf(child);
    return nested ? [dotted, ...keys(child, `${dotted}.`)] : [dotted];
  });
}

describe("docs/configuration.md", () => {
  it("documents every configuration key and its environment variable", () => {
    const doc = readFileSync(join(packageRoot(), "docs", "configuration.md"), "utf8");
    const all = keys(sluiceConfigSchema as unknown as Node);
    expect(all.length).toBeGreaterThan(50);
    const missing = all.filter((key) => !doc.includes(`\`${key}\``));
    // Sections and kafka.sasl are objects: only their leaves have an environment variable.
    const leaves = all.filter((key) => !all.some((other) => other.startsWith(`${key}.`)));
    const missingEnv = leaves.filter((key) => !doc.includes(`\`${envNameFor(key)}\``));
    expect(missing).toEqual([]);
    expect(missingEnv).toEqual([]);
  });
});
