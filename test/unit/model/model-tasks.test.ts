import { describe, expect, it } from "vitest";
import {
  classificationOutput,
  labelsFromMetadata,
  softmaxRows,
} from "../../../src/model/tasks/classification-task.js";
import { poolEmbeddings } from "../../../src/model/tasks/embedding-task.js";

describe("embedding pooling", () => {
  // 2 rows × 3 positions × 2 hidden; row 1 has its last position padded
  const hidden = Float32Array.of(1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 99, 99);
  const mask = BigInt64Array.of(1n, 1n, 1n, 1n, 1n, 0n);

  it("cls takes position 0; mean ignores padded positions", () => {
    expect([...poolEmbeddings(hidden, [2, 3, 2], mask, "cls", false).data]).toEqual([1, 2, 10, 20]);
    expect([...poolEmbeddings(hidden, [2, 3, 2], mask, "mean", false).data]).toEqual([3, 4, 20, 30]);
  });

  it("normalises rows to unit length and passes 2-D outputs through", () => {
    const { data, dim } = poolEmbeddings(Float32Array.of(3, 4, 0, 0), [2, 2], mask, "cls", true);
    expect(dim).toBe(2);
    expect([...data]).toEqual([0.6000000238418579, 0.800000011920929, 0, 0]);
  });

  it("rejects other ranks", () => {
    expect(() => poolEmbeddings(hidden, [12], mask, "cls", true)).toThrow(/2-D or 3-D/);
  });
});

describe("classification", () => {
  it("softmax is stable for large logits and sums to 1", () => {
    const { data } = softmaxRows(Float32Array.of(1000, 1000, 0, 1, 2, 3), [2, 3]);
    expect(data[0]).toBeCloseTo(0.5, 6);
    expect(data[2]).toBe(0);
    const e = [Math.exp(1), Math.exp(2), Math.exp(3)];
    const s = e[0]! + e[1]! + e[2]!;
    expect(data[5]).toBeCloseTo(e[2]! / s, 6);
  });

  it("label is the arg-max; scores name every class", () => {
    expect(classificationOutput(Float32Array.of(0.2, 0.7, 0.1), ["neg", "pos", "mixed"])).toEqual({
      label: "pos",
      scores: { neg: expect.closeTo(0.2, 6), pos: expect.closeTo(0.7, 6), mixed: expect.closeTo(0.1, 6) },
    });
  });

  it("reads labels from id2label (object or array) or a labels list", () => {
    expect(labelsFromMetadata({ id2label: '{"1":"pos","0":"neg"}' })).toEqual(["neg", "pos"]);
    expect(labelsFromMetadata({ id2label: '["a","b"]' })).toEqual(["a", "b"]);
    expect(labelsFromMetadata({ labels: "x, y" })).toEqual(["x", "y"]);
    expect(labelsFromMetadata({})).toBeNull();
  });
});
