import { describe, expect, it } from "vitest";
import type { MicroBatch, MicroBatcherOptions } from "../../../src/batching/micro-batcher.js";
import { MicroBatcher } from "../../../src/batching/micro-batcher.js";
import { FakeClock } from "../../support/fake-clock.js";

function setup(opts: Partial<MicroBatcherOptions<string>> = {}) {
  const clock = new FakeClock();
  const batches: MicroBatch<string>[] = [];
  const batcher = new MicroBatcher<string>({
    maxBatchSize: 4,
    maxBatchTokens: 100,
    maxWaitMs: 10,
    clock,
    onBatch: (b) => batches.push(b),
    ...opts,
  });
  return { clock, batches, batcher };
}

const plain = { tokens: 10, deadlineMs: null };

describe("MicroBatcher", () => {
  it("flushes by size immediately, in arrival order", () => {
    const { batches, batcher } = setup();
    for (const id of ["a", "b", "c", "d", "e"]) batcher.add(id, plain);
    expect(batches).toHaveLength(1);
    expect(batches[0]?.items).toEqual(["a", "b", "c", "d"]);
    expect(batches[0]?.reason).toBe("size");
    expect(batches[0]?.tokens).toBe(40);
    expect(batcher.size).toBe(1);
    expect(batcher.queuedTokens).toBe(10);
  });

  it("flushes by wait after maxWaitMs with one timer", () => {
    const { clock, batches, batcher } = setup();
    batcher.add("a", plain);
    clock.advance(4);
    batcher.add("b", plain);
    expect(batches).toHaveLength(0);
    expect(clock.timers.size).toBe(1);
    clock.advance(5);
    expect(batches).toHaveLength(0);
    clock.advance(1);
    expect(batches).toHaveLength(1);
    const b = batches[0]!;
    expect(b.items).toEqual(["a", "b"]);
    expect(b.reason).toBe("wait");
    expect(b.formedAtMs).toBe(1010);
    expect(b.enqueuedAtMs).toEqual([1000, 1004]);
    expect(clock.timers.size).toBe(0);
  });

  it("does not reschedule the timer on every add", () => {
    const { clock, batcher } = setup({ maxBatchSize: 1000, maxBatchTokens: 1_000_000 });
    for (let i = 0; i < 100; i++) batcher.add(`r${i}`, plain);
    expect(clock.setCalls).toBe(1);
  });

  it("flushes by tokens, taking only what fits; an oversized item goes alone", () => {
    const { batches, batcher } = setup();
    batcher.add("a", { tokens: 60, deadlineMs: null });
    batcher.add("b", { tokens: 60, deadlineMs: null });
    expect(batches.map((b) => b.items)).toEqual([["a"]]);
    expect(batches[0]?.reason).toBe("tokens");
    batcher.add("big", { tokens: 500, deadlineMs: null });
    expect(batches.map((b) => b.items)).toEqual([["a"], ["b"], ["big"]]);
    expect(batcher.size).toBe(0);
    expect(batcher.queuedTokens).toBe(0);
  });

  it("flushes early for a deadline, accounting for estimated inference time", () => {
    const { clock, batches, batcher } = setup({ maxWaitMs: 50 });
    batcher.setEstimatedInferenceMs(5);
    batcher.add("a", plain);
    batcher.add("urgent", { tokens: 10, deadlineMs: 1020 });
    clock.advance(14);
    expect(batches).toHaveLength(0);
    clock.advance(1);
    expect(batches).toHaveLength(1);
    expect(batches[0]?.reason).toBe("deadline");
    expect(batches[0]?.items).toEqual(["a", "urgent"]);
  });

  it("a raised inference estimate can trigger a deadline flush at once", () => {
    const { batches, batcher } = setup({ maxWaitMs: 50 });
    batcher.add("a", { tokens: 1, deadlineMs: 1030 });
    expect(batches).toHaveLength(0);
    batcher.setEstimatedInferenceMs(40);
    expect(batches.map((b) => b.reason)).toEqual(["deadline"]);
  });

  it("recomputes the earliest deadline after a flush", () => {
    const { clock, batches, batcher } = setup({ maxBatchSize: 2, maxWaitMs: 1000 });
    batcher.add("a", { tokens: 1, deadlineMs: 1005 });
    batcher.add("b", { tokens: 1, deadlineMs: null });
    expect(batches).toHaveLength(1);
    batcher.add("c", { tokens: 1, deadlineMs: 1500 });
    clock.advance(100);
    expect(batches).toHaveLength(1); // the old deadline (1005) no longer applies
    clock.advance(400);
    expect(batches[1]?.reason).toBe("deadline");
    expect(batches[1]?.items).toEqual(["c"]);
  });

  it("flush() emits everything queued now, with the given reason, and stops the timer", () => {
    const { batches, batcher, clock } = setup({ maxBatchSize: 10, maxWaitMs: 1000 });
    batcher.add("x", plain);
    batcher.add("y", plain);
    batcher.add("z", plain);
    expect(clock.timers.size).toBe(1);
    batcher.flush("wait");
    expect(batches).toEqual([expect.objectContaining({ items: ["x", "y", "z"], reason: "wait" })]);
    expect(batcher.size).toBe(0);
    expect(clock.timers.size).toBe(0);
    batcher.add("w", plain);
    batcher.flush();
    expect(batches[1]).toMatchObject({ items: ["w"], reason: "shutdown" });
  });

  it("drop() removes matching items, keeps order, and updates size, tokens and deadline", () => {
    const { clock, batches, batcher } = setup({ maxWaitMs: 100, maxBatchSize: 10 });
    batcher.add("p0:a", { tokens: 1, deadlineMs: 1010 });
    batcher.add("p1:b", { tokens: 2, deadlineMs: null });
    batcher.add("p0:c", { tokens: 3, deadlineMs: null });
    batcher.add("p1:d", { tokens: 4, deadlineMs: 1050 });
    expect(batcher.drop((id) => id.startsWith("p0:"))).toBe(2);
    expect(batcher.size).toBe(2);
    expect(batcher.queuedTokens).toBe(6);
    expect(batcher.drop(() => false)).toBe(0);
    clock.advance(20); // old deadline 1010 was dropped with p0:a
    expect(batches).toHaveLength(0);
    clock.advance(30);
    expect(batches[0]).toMatchObject({ items: ["p1:b", "p1:d"], reason: "deadline" });
  });

  it("drop() of everything clears the timer", () => {
    const { clock, batcher } = setup();
    batcher.add("a", plain);
    expect(clock.timers.size).toBe(1);
    expect(batcher.drop(() => true)).toBe(1);
    expect(clock.timers.size).toBe(0);
  });

  it("close() flushes the rest as shutdown, stops timers, is idempotent and refuses new items", () => {
    const { clock, batches, batcher } = setup();
    batcher.add("a", plain);
    batcher.add("b", plain);
    batcher.close();
    batcher.close();
    expect(batches).toEqual([expect.objectContaining({ items: ["a", "b"], reason: "shutdown" })]);
    expect(clock.timers.size).toBe(0);
    expect(() => batcher.add("c", plain)).toThrow(/after close/);
  });

  it("handles add() from inside onBatch without losing or reordering items", () => {
    const clock = new FakeClock();
    const seen: string[][] = [];
    let injected = false;
    const batcher: MicroBatcher<string> = new MicroBatcher<string>({
      maxBatchSize: 2,
      maxWaitMs: 10,
      clock,
      onBatch: (b) => {
        seen.push(b.items);
        if (!injected) {
          injected = true;
          batcher.add("late1", plain);
          batcher.add("late2", plain);
        }
      },
    });
    batcher.add("a", plain);
    batcher.add("b", plain);
    expect(seen).toEqual([
      ["a", "b"],
      ["late1", "late2"],
    ]);
  });

  it("keeps arrival order and loses nothing across many compactions", () => {
    const { clock, batches, batcher } = setup({ maxBatchSize: 7, maxBatchTokens: 1e9, maxWaitMs: 3 });
    const n = 5000;
    for (let i = 0; i < n; i++) {
      batcher.add(String(i), { tokens: i % 13, deadlineMs: i % 50 === 0 ? clock.nowMs + 2 : null });
      if (i % 11 === 0) clock.advance(1);
    }
    clock.advance(10);
    const out = batches.flatMap((b) => b.items);
    expect(out).toEqual(Array.from({ length: n }, (_, i) => String(i)));
    expect(batcher.size).toBe(0);
    expect(batcher.queuedTokens).toBe(0);
    for (const b of batches) expect(b.items.length).toBeLessThanOrEqual(7);
  });

  it("validates options at construction", () => {
    const onBatch = () => {};
    expect(() => new MicroBatcher({ onBatch, maxBatchSize: 0 })).toThrow(/maxBatchSize/);
    expect(() => new MicroBatcher({ onBatch, maxWaitMs: -5 })).toThrow(/maxWaitMs/);
    expect(() => new MicroBatcher({ onBatch: undefined as never })).toThrow(/onBatch/);
    const b = new MicroBatcher<string>({ onBatch });
    expect(() => b.add("x", { tokens: Number.NaN, deadlineMs: null })).toThrow(/tokens/);
    b.close();
  });

  it("works with the real clock and default options", async () => {
    const batches: MicroBatch<number>[] = [];
    const b = new MicroBatcher<number>({ onBatch: (x) => batches.push(x) });
    b.add(1, plain);
    b.add(2, plain);
    await new Promise((r) => setTimeout(r, 40));
    expect(batches).toHaveLength(1);
    expect(batches[0]).toMatchObject({ items: [1, 2], reason: "wait" });
    b.close();
  });
});
