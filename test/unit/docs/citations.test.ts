import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";

/**
 * The repository stands alone: every file a source file, test, bench or doc cites is in the
 * repository, and no file cites a document that lives elsewhere (design knowledge belongs in docs/).
 */
const root = packageRoot();
const tracked = execFileSync("git", ["ls-files"], { cwd: root, encoding: "utf8" })
  .split("\n")
  .filter((f) => /\.(ts|md|cjs|ya?ml|sh)$/.test(f) && existsSync(join(root, f)));

/** A repository path cited in text: src/…, test/…, bench/…, docs/…, scripts/…, schemas/…, deploy/…. */
const PATH =
  /(?<![\w./-])((?:src|test|bench|docs|scripts|schemas|deploy)\/[\w./-]*\w\.(?:ts|md|avsc|sh|ya?ml|json))\b/g;
/** A relative Markdown link target in a doc: [text](other.md) or (other.md#anchor). */
const MD_LINK = /\]\(((?!https?:|#|mailto:)[^)\s#]+)(?:#[^)]*)?\)/g;

function cited(text: string): string[] {
  return [...text.matchAll(PATH)].map((m) => m[1] as string);
}

function exists(path: string): boolean {
  if (path.includes("*")) return true; // a pattern (`test/e2e/tensor-*.test.ts`), not one file
  return existsSync(join(root, path)) || existsSync(join(root, path.replace(/\.js$/, ".ts")));
}

describe("the repository stands alone", () => {
  it("no file cites a design document outside the repository", () => {
    const outside = tracked.filter((f) => /\bDESIGN\.md\b/.test(readFileSync(join(root, f), "utf8")));
    expect(outside).toEqual([]);
  });

  it("every repository path a file cites exists", () => {
    const missing: string[] = [];
    for (const f of tracked) {
      for (const p of cited(readFileSync(join(root, f), "utf8"))) if (!exists(p)) missing.push(`${f}: ${p}`);
    }
    expect(missing).toEqual([]);
  });

  it("every relative link in a Markdown file points at a file that exists", () => {
    const missing: string[] = [];
    for (const f of tracked.filter((t) => t.endsWith(".md"))) {
      for (const m of readFileSync(join(root, f), "utf8").matchAll(MD_LINK)) {
        const target = normalize(join(dirname(f), m[1] as string));
        if (!existsSync(join(root, target))) missing.push(`${f}: ${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
