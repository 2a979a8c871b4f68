import { describe, expect, it } from "vitest";
import { decideLanes, type LaneQueueState, type QueueState } from "../../../src/microbatch/batch-policy.js";
import { type LaneBatch, LaneBatcher } from "../../../src/microbatch/lane-batcher.js";
import { FakeClock } from "../../support/fake-clock.js";

const opts = { maxBatchSize: 4, maxBatchTokens: 100, maxWaitMs: 10, estimatedInferenceMs: 0 };
const empty: QueueState = {
  count: 0,
  tokens: 0,
  oldestEnqueuedAtMs: null,
  earliestDeadlineMs: null,
  closing: false,
};
const queued = (count: number, over: Partial<QueueState> = {}): QueueState => ({
  count,
  tokens: count,
  oldestEnqueuedAtMs: 1000,
  earliestDeadlineMs: null,
  closing: false,
  ...over,
});
const state = (over: Partial<LaneQueueState>): LaneQueueState => ({
  online: empty,
  backfill: empty,
  onlineRunning: 0,
  onlineSlots: 1,
  backfillRunning: 0,
  backfillSlots: 1,
  ...over,
});

describe("decideLanes (pure, fake time)", () => {
  it("backfill fills an idle model at once, in slices of at most maxBatchSize", () => {
    expect(decideLanes(state({ backfill: queued(10) }), 1000, opts)).toEqual({
      flush: true,
      lane: "backfill",
      reason: "fill",
      take: 4,
    });
  });

  it("online items waiting only for company (a slot free) do not hold backfill back; their rule still fires", () => {
    // At 1005 the online item waits for company until 1010 with its slot free: the model would idle.
    expect(decideLanes(state({ online: queued(1), backfill: queued(10) }), 1005, opts)).toEqual({
      flush: true,
      lane: "backfill",
      reason: "fill",
      take: 4,
    });
    // The online wait rule fires at 1010 whatever backfill holds (a backfill batch is running).
    expect(
      decideLanes(state({ online: queued(1), backfill: queued(10), backfillRunning: 1 }), 1010, opts),
    ).toMatchObject({ flush: true, lane: "online", reason: "wait" });
  });

  it("no backfill while an online item waits for a slot (the model is busy with online work)", () => {
    const d = decideLanes(state({ online: queued(1), backfill: queued(10), onlineRunning: 1 }), 1005, opts);
    expect(d).toEqual({ flush: false, waitMs: Number.POSITIVE_INFINITY });
  });

  it("no backfill batch forms while the backfill slots are taken (none waits ahead of online work)", () => {
    expect(decideLanes(state({ backfill: queued(10), backfillRunning: 1 }), 1000, opts)).toEqual({
      flush: false,
      waitMs: Number.POSITIVE_INFINITY,
    });
  });

  it("online flushes by its rules whatever backfill does, once an online slot is free", () => {
    const busyBackfill = { backfill: queued(10), backfillRunning: 1 };
    expect(decideLanes(state({ ...busyBackfill, online: queued(4) }), 1000, opts)).toMatchObject({
      lane: "online",
      reason: "size",
      take: 4,
    });
    // Its slot is taken: the online batch keeps filling in the queue (and backfill still waits).
    expect(
      decideLanes(state({ online: queued(4), onlineRunning: 1, backfill: queued(3) }), 1000, opts),
    ).toEqual({ flush: false, waitMs: Number.POSITIVE_INFINITY });
  });

  it("shutdown flushes both lanes, online first, regardless of slots", () => {
    const closing = state({
      online: queued(2, { closing: true }),
      backfill: queued(2, { closing: true }),
      onlineRunning: 1,
      backfillRunning: 1,
    });
    expect(decideLanes(closing, 1000, opts)).toMatchObject({ lane: "online", reason: "shutdown" });
    expect(decideLanes({ ...closing, online: { ...empty, closing: true } }, 1000, opts)).toMatchObject({
      lane: "backfill",
      reason: "shutdown",
    });
  });
});

function setup() {
  const clock = new FakeClock();
  const batches: LaneBatch<string>[] = [];
  const batcher = new LaneBatcher<string>({
    maxBatchSize: 2,
    maxBatchTokens: 100,
    maxWaitMs: 10,
    onlineSlots: 1,
    backfillSlots: 1,
    clock,
    onBatch: (b) => batches.push(b),
  });
  const lanes = () => batches.map((b) => `${b.lane}:${b.items.join(",")}`);
  return { clock, batches, batcher, lanes };
}

describe("LaneBatcher (fake clock)", () => {
  it("an online request arriving mid-backfill goes before every backfill row not yet started", () => {
    const { clock, batcher, lanes } = setup();
    for (const id of ["b1", "b2", "b3", "b4", "b5"])
      batcher.add(id, { lane: "backfill", tokens: 1, deadlineMs: null });
    // The idle model takes b1 at once; one slot, so the rest stays in the lane (no batch waits ahead).
    expect(lanes()).toEqual(["backfill:b1"]);
    batcher.add("o1", { lane: "online", tokens: 1, deadlineMs: 5000 });
    // The slice finishes while o1 only waits for company (its slot is free): backfill keeps the model busy.
    batcher.done("backfill");
    expect(lanes()).toEqual(["backfill:b1", "backfill:b2,b3"]);
    // o1's wait rule fires with the backfill slot still taken: it leaves at once, ahead of b4 and b5.
    clock.advance(10);
    expect(lanes()).toEqual(["backfill:b1", "backfill:b2,b3", "online:o1"]);
    batcher.done("backfill");
    expect(lanes()).toEqual(["backfill:b1", "backfill:b2,b3", "online:o1", "backfill:b4,b5"]);
  });

  it("within the online lane the earliest deadline goes first (ties and no-deadline items keep arrival order)", () => {
    const { clock, batcher, lanes } = setup();
    batcher.add("first", { lane: "online", tokens: 1, deadlineMs: 9000 });
    clock.advance(10); // "first" leaves alone (wait) and takes the one online slot
    for (const [id, deadline] of [
      ["late", 8000],
      ["none", null],
      ["soon", 2000],
      ["soon-2", 2000],
      ["mid", 5000],
    ] as const)
      batcher.add(id, { lane: "online", tokens: 1, deadlineMs: deadline });
    batcher.done("online");
    batcher.done("online");
    batcher.done("online");
    clock.advance(10); // the last one alone waits maxWaitMs for company
    expect(lanes()).toEqual(["online:first", "online:soon,soon-2", "online:mid,late", "online:none"]);
  });

  it("the wait rule counts from the online item queued longest, even when later ones sort ahead of it", () => {
    const clock = new FakeClock();
    const batches: LaneBatch<string>[] = [];
    const batcher = new LaneBatcher<string>({
      ...{ maxBatchSize: 3, maxBatchTokens: 100, maxWaitMs: 10, onlineSlots: 1, backfillSlots: 1 },
      clock,
      onBatch: (batch) => batches.push(batch),
    });
    const online = (id: string, deadlineMs: number) =>
      batcher.add(id, { lane: "online", tokens: 1, deadlineMs });
    online("x", 90_000);
    clock.advance(10); // x leaves alone (wait) and takes the one online slot
    online("a", 50_000); // queued at +10
    clock.advance(1);
    for (const [id, deadline] of [
      ["b", 40_000],
      ["c", 30_000],
      ["d", 25_000],
    ] as const)
      online(id, deadline);
    batcher.done("online"); // the three earliest deadlines leave (size); a stays, queued longest
    clock.advance(3);
    online("e", 20_000); // queued at +14 and sorted ahead of a
    online("f", 95_000);
    batcher.drop((item) => item === "f");
    batcher.done("online"); // a and e wait for company: a's wait ends at +20, not e's at +24
    clock.advance(5);
    expect(batches.map((b) => b.items.join(","))).toEqual(["x", "d,c,b"]);
    clock.advance(1);
    expect(batches.map((b) => `${b.reason}:${b.items.join(",")}`)).toEqual([
      "wait:x",
      "size:d,c,b",
      "wait:e,a",
    ]);
  });

  it("the online deadline rule still fires early enough to finish (estimatedInferenceMs)", () => {
    const { clock, batcher, lanes } = setup();
    batcher.setEstimatedInferenceMs(50);
    batcher.add("o", { lane: "online", tokens: 1, deadlineMs: clock.now() + 55 });
    clock.advance(5);
    expect(lanes()).toEqual(["online:o"]); // at 1005 = deadline − estimate, before maxWaitMs
  });

  it("positions: how many queued online items run before a new deadline", () => {
    const { batcher, clock } = setup();
    batcher.add("first", { lane: "online", tokens: 1, deadlineMs: null });
    clock.advance(10); // takes the only online slot; the next ones stay queued
    batcher.add("b", { lane: "online", tokens: 1, deadlineMs: 5000 });
    batcher.add("c", { lane: "online", tokens: 1, deadlineMs: 7000 });
    expect(batcher.onlineSize).toBe(2);
    expect(batcher.onlinePositionOf(6000)).toBe(1);
    expect(batcher.onlinePositionOf(4000)).toBe(0);
    expect(batcher.onlinePositionOf(7000)).toBe(2); // ties go after the ones already queued
  });

  it("drop removes a partition's items from both lanes; close flushes both with reason shutdown", () => {
    const { batcher, batches } = setup();
    for (const id of ["b1", "b2", "b3", "x4"])
      batcher.add(id, { lane: "backfill", tokens: 1, deadlineMs: null });
    batcher.add("o1", { lane: "online", tokens: 1, deadlineMs: null });
    expect(batcher.drop((id) => id.startsWith("x"))).toBe(1);
    batcher.close();
    expect(batches.map((b) => [b.lane, b.reason, b.items])).toEqual([
      ["backfill", "fill", ["b1"]],
      ["online", "shutdown", ["o1"]],
      ["backfill", "shutdown", ["b2", "b3"]],
    ]);
  });
});
