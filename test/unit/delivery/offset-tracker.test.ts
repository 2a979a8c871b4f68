import { describe, expect, it } from "vitest";
import { OffsetTracker } from "../../../src/delivery/offset-tracker.js";

describe("OffsetTracker", () => {
  it("hands out only the contiguous completed prefix", () => {
    const t = new OffsetTracker<string>();
    for (const o of ["5", "6", "7"]) t.track(o);
    expect(t.complete("6", "b")).toBe(true);
    expect(t.takeCommittable()).toBeUndefined();
    t.complete("5", "a");
    expect(t.takeCommittable()).toEqual({
      nextOffset: "7",
      completions: ["a", "b"],
      offsets: ["5", "6"],
      capped: false,
    });
    expect(t.size).toBe(1);
    t.complete("7", "c");
    expect(t.takeCommittable()).toEqual({
      nextOffset: "8",
      completions: ["c"],
      offsets: ["7"],
      capped: false,
    });
    expect(t.takeCommittable()).toBeUndefined();
  });

  it("skips offset gaps left by transaction markers", () => {
    const t = new OffsetTracker<number>();
    t.track("10");
    t.track("12");
    t.complete("12", 12);
    t.complete("10", 10);
    expect(t.takeCommittable()).toEqual({
      nextOffset: "13",
      completions: [10, 12],
      offsets: ["10", "12"],
      capped: false,
    });
  });

  it("rejects non-increasing offsets and unknown or repeated completions", () => {
    const t = new OffsetTracker<number>();
    t.track("3");
    expect(() => t.track("3")).toThrow(/not above/);
    expect(t.complete("4", 1)).toBe(false);
    expect(t.complete("3", 1)).toBe(true);
    expect(t.complete("3", 2)).toBe(false);
    t.reset();
    t.track("1");
    expect(t.size).toBe(1);
  });

  it("handles offsets beyond 2^53 and many records", () => {
    const t = new OffsetTracker<number>();
    const base = 2n ** 60n;
    for (let i = 0n; i < 5000n; i++) t.track((base + i).toString());
    for (let i = 4999n; i >= 0n; i--) t.complete((base + i).toString(), Number(i));
    const r = t.takeCommittable();
    expect(r?.nextOffset).toBe((base + 5000n).toString());
    expect(r?.completions).toHaveLength(5000);
    expect(t.size).toBe(0);
  });

  it("crosses 2^53 exactly, with completions in any order over several slices", () => {
    const t = new OffsetTracker<string>();
    const first = 2n ** 53n - 3000n; // the last safe integers, then bigints
    const offsets: string[] = [];
    for (let i = 0n; i < 6000n; i += 2n) offsets.push((first + i).toString()); // gaps, as markers leave
    for (const o of offsets) t.track(o);
    expect(() => t.track(offsets[offsets.length - 1] as string)).toThrow(/not above/);
    // A fixed shuffle: completions far from delivery order, and slices taken in between.
    const order = offsets.map((o, i) => ({ o, k: (i * 7919) % offsets.length })).sort((a, b) => a.k - b.k);
    const taken: string[] = [];
    let next = "";
    order.forEach(({ o }, i) => {
      expect(t.complete(o, `done ${o}`)).toBe(true);
      expect(t.complete(o, "again")).toBe(false);
      if (i % 500 === 499) {
        const r = t.takeCommittable();
        if (r) {
          taken.push(...r.offsets);
          expect(r.completions).toEqual(r.offsets.map((x) => `done ${x}`));
          next = r.nextOffset;
        }
      }
    });
    const r = t.takeCommittable();
    if (r) {
      taken.push(...r.offsets);
      next = r.nextOffset;
    }
    expect(taken).toEqual(offsets);
    expect(next).toBe((first + 5998n + 1n).toString());
    expect(t.complete(offsets[0] as string, "late")).toBe(false); // taken already
    expect(t.size).toBe(0);
  });

  it("caps a slice by records and bytes at a record boundary, at least one record, rest stays", () => {
    const t = new OffsetTracker<number>();
    for (let o = 0; o < 6; o++) t.track(String(o));
    for (let o = 0; o < 6; o++) t.complete(String(o), o === 3 ? 1000 : 10, o === 3 ? 1000 : 10);
    const limit = { maxRecords: 2, maxBytes: 100 };
    expect(t.takeCommittable(limit)).toEqual({
      nextOffset: "2",
      completions: [10, 10],
      offsets: ["0", "1"],
      capped: true,
    });
    // 10 + 1000 > 100: the big one waits for its own slice.
    expect(t.takeCommittable(limit)).toEqual({
      nextOffset: "3",
      completions: [10],
      offsets: ["2"],
      capped: true,
    });
    expect(t.takeCommittable(limit)).toEqual({
      nextOffset: "4",
      completions: [1000],
      offsets: ["3"],
      capped: true,
    });
    expect(t.size).toBe(2);
    const rest = t.takeCommittable(limit);
    expect(rest?.offsets).toEqual(["4", "5"]);
    expect(rest?.capped).toBe(false); // nothing was left behind it
    expect(t.takeCommittable(limit)).toBeUndefined();
  });
});
