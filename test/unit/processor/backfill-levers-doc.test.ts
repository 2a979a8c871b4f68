import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { BackfillLimits } from "../../../src/contracts/backfill-limits.js";
import { backfillLimits, GUARD, LEVERS } from "../../../src/processor/backfill-guard.js";

/**
 * docs/lanes.md's levers table says what the code does: its columns are the levers of
 * `BackfillLimits` (each header names its field), its rows the bands of `LEVERS`, and each cell, at
 * allowances inside its band, is the value `backfillLimits` gives.
 */
const doc = readFileSync(fileURLToPath(new URL("../../../docs/lanes.md", import.meta.url)), "utf8");
const MAX_IN_FLIGHT = 3;
/** Allowances to try in each band (the guard never keeps one between 0 and its floor). */
const SAMPLES: Record<string, number[]> = {
  "1": [1],
  "0 < a < 1": [GUARD.floor, 0.2, 0.25, 0.5, 0.99],
  "0": [0],
};

function leversTable(): string[][] {
  const lines = doc.slice(doc.indexOf("**The levers**")).split("\n");
  const start = lines.findIndex((l) => l.startsWith("|"));
  const end = lines.findIndex((l, i) => i > start && !l.startsWith("|"));
  return lines.slice(start, end).map((l) =>
    l
      .slice(1, -1)
      .split("|")
      .map((c) => c.trim()),
  );
}

/** A cell's value: what stands before its parenthesised remark, in the table's small vocabulary. */
function cellValue(cell: string, a: number): number | boolean {
  const v = cell.replace(/\s+\(.*\)$/, "").replaceAll("`", "");
  if (v === "batching.maxInFlightBatches") return MAX_IN_FLIGHT;
  if (v === "a") return a;
  if (v === "yes" || v === "no") return v === "yes";
  const max = /^max\(a, ([\d.]+)\)$/.exec(v);
  if (max) return Math.max(a, Number(max[1]));
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v);
  throw new Error(`docs/lanes.md levers table: a cell this test cannot read: "${cell}"`);
}

describe("docs/lanes.md's levers table and LEVERS agree", () => {
  const [header, , ...rows] = leversTable() as [string[], string[], ...string[][]];
  const fields = header.slice(1).map((h) => /\(`(\w+)`\)$/.exec(h)?.[1]) as (keyof BackfillLimits)[];

  it("has one column per lever and one row per band, in the code's order", () => {
    expect([...fields].sort()).toEqual(Object.keys(backfillLimits(1, MAX_IN_FLIGHT)).sort());
    expect(rows.map((r) => r[0])).toEqual(LEVERS.map((r) => r.allowance));
  });

  it("each cell is the lever's value at allowances inside its band", () => {
    for (const [band, ...cells] of rows) {
      for (const a of SAMPLES[band as string] ?? []) {
        expect(LEVERS.find((r) => r.holds(a))?.allowance, `allowance ${a}`).toBe(band);
        const documented = Object.fromEntries(fields.map((f, i) => [f, cellValue(cells[i] as string, a)]));
        expect(documented, `band ${band}, allowance ${a}`).toEqual(backfillLimits(a, MAX_IN_FLIGHT));
      }
    }
  });
});
