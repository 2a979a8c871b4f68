import { describe, expect, it } from "vitest";
import { agreement, isShadowed } from "../../../src/delivery/shadow-agreement.js";

describe("shadow agreement: only where it means something", () => {
  it("label agreement for classifiers: 1 for the same label, 0 otherwise", () => {
    const out = (label: string) => ({ label, scores: { [label]: 1 } });
    expect(agreement(out("pos"), out("pos"))).toEqual({ measure: "label", value: 1 });
    expect(agreement(out("pos"), out("neg"))).toEqual({ measure: "label", value: 0 });
  });
  it("cosine for embeddings of the same dimensions only", () => {
    expect(agreement({ embedding: [1, 0] }, { embedding: [1, 0] })).toEqual({ measure: "cosine", value: 1 });
    expect(agreement({ embedding: [1, 0] }, { embedding: [0, 1] })?.value).toBeCloseTo(0);
    expect(agreement({ embedding: [1, 0] }, { embedding: [1, 0, 0] })).toBeUndefined();
    expect(agreement({ embedding: [1, 0] }, { label: "x", scores: {} })).toBeUndefined();
  });
  it("max abs difference for same-named, same-shaped tensors", () => {
    const t = (data: number[], shape = [1, data.length]) => ({
      tensors: [{ name: "y", datatype: "FP32" as const, shape, data }],
    });
    expect(agreement(t([1, 2, 3]), t([1, 2.5, 2]))).toEqual({ measure: "max_abs_diff", value: 1 });
    expect(agreement(t([1, 2]), t([1, 2, 3]))).toBeUndefined();
  });
});

describe("which requests are shadowed", () => {
  it("by a hash of the request id: the same id always the same way, about the share of all ids", () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => `req-${i}`);
    const picked = ids.filter((id) => isShadowed(id, 0.1));
    expect(picked.length).toBeGreaterThan(800);
    expect(picked.length).toBeLessThan(1200);
    expect(ids.filter((id) => isShadowed(id, 0.1))).toEqual(picked);
    expect(ids.some((id) => isShadowed(id, 0))).toBe(false);
    expect(ids.every((id) => isShadowed(id, 1))).toBe(true);
  });
});
