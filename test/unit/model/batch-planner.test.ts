import { describe, expect, it } from "vitest";
import { padSequences, planSubBatches } from "../../../src/model/batch-planner.js";

describe("planSubBatches", () => {
  it("without bucketing: one call padded to the longest item, input order", () => {
    expect(planSubBatches([5, 30, 7], false)).toEqual([{ indices: [0, 1, 2], seqLen: 30, realTokens: 42 }]);
  });

  it("with bucketing: sorted by length, split where padding efficiency would drop below the floor", () => {
    const lengths = [40, 10, 11, 42, 12, 100, 10];
    const plan = planSubBatches(lengths, true, 0.8);
    expect(plan.map((p) => p.indices)).toEqual([[1, 6, 2, 4], [0, 3], [5]]);
    expect(plan.map((p) => p.seqLen)).toEqual([12, 42, 100]);
    // every item exactly once, and every sub-batch meets the floor
    expect(plan.flatMap((p) => p.indices).sort()).toEqual([0, 1, 2, 3, 4, 5, 6]);
    for (const p of plan) expect(p.realTokens / (p.seqLen * p.indices.length)).toBeGreaterThanOrEqual(0.8);
  });

  it("keeps ties in input order and handles empty input", () => {
    expect(planSubBatches([3, 3, 3], true)[0]!.indices).toEqual([0, 1, 2]);
    expect(planSubBatches([], true)).toEqual([]);
  });
});

describe("padSequences", () => {
  it("right-pads ids with 0 and the mask with 0", () => {
    const { inputIds, attentionMask } = padSequences([Int32Array.of(2, 7, 3), Int32Array.of(2, 3)], 3);
    expect([...inputIds]).toEqual([2n, 7n, 3n, 2n, 3n, 0n]);
    expect([...attentionMask]).toEqual([1n, 1n, 1n, 1n, 1n, 0n]);
  });
});
