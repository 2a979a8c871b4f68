import { describe, expect, it } from "vitest";
import type { BackfillLimits } from "../../../src/contracts/backfill-limits.js";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { GUARD } from "../../../src/processor/backfill-guard.js";
import { BackfillThrottle } from "../../../src/processor/backfill-throttle.js";
import { FakeClock } from "../../support/fake-clock.js";

/** A throttle with recording levers, a fake clock, online topic "in" and backfill topic "bf". */
function throttle(oldestOnline: () => number | undefined = () => undefined) {
  const clock = new FakeClock();
  const events = new SluiceEvents();
  const applied: Array<{
    slots?: number;
    model?: Pick<BackfillLimits, "workerShare" | "workerDepth" | "sliceShare">;
    fetchPaused?: boolean;
  }> = [];
  const t = new BackfillThrottle({
    target: 200,
    maxInFlightBatches: 2,
    events,
    clock,
    log: { info() {}, warn() {}, error() {} },
    isOnlineTopic: (topic) => topic === "in",
    oldestOnlineInFlightMs: oldestOnline,
    levers: {
      setBatchSlots: (slots) => applied.push({ slots }),
      limitModel: (model) => applied.push({ model }),
      holdFetches: (fetchPaused) => applied.push({ fetchPaused }),
    },
  });
  return { t, clock, events, applied };
}

/** A backfill batch went through the model (the guard's sign that the lane is busy). */
function backfillBatch(events: SluiceEvents): void {
  events.emit("microbatch.inferred", {
    lane: "backfill",
    size: 4,
    inferenceMs: 10,
    realTokens: 40,
    paddedTokens: 40,
    expired: 0,
    failed: 0,
  });
}

const lastModel = (applied: ReturnType<typeof throttle>["applied"]) =>
  applied.flatMap((a) => (a.model ? [a.model] : [])).at(-1);

describe("BackfillThrottle: the guard's decisions reach the levers", () => {
  it("the first decision comes before the first backfill batch: start() applies the start allowance at once", () => {
    const { t, applied } = throttle();
    t.start();
    // No tick yet (the clock has not moved): the backfill lane already has one slot and a duty cycle.
    expect(applied.find((a) => a.slots !== undefined)?.slots).toBe(1);
    expect(lastModel(applied)?.workerShare).toBe(GUARD.startAllowance);
    expect(t.commitShare()).toBe(0.25);
    t.stop();
  });

  it("earns full speed while backfill runs and online is calm, and starts cautious again when a backfill partition moves in", () => {
    const { t, clock, events, applied } = throttle();
    t.start();
    for (let i = 0; i < 20; i++) {
      backfillBatch(events);
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.workerShare).toBe(1);
    // An online partition moving in changes nothing; a backfill one restarts the ramp at once.
    events.emit("partitions.assigned", { topic: "in", partitions: [0] });
    expect(lastModel(applied)?.workerShare).toBe(1);
    events.emit("partitions.assigned", { topic: "bf", partitions: [3] });
    expect(lastModel(applied)?.workerShare).toBe(GUARD.startAllowance);
    t.stop();
    // Stopped: every limit lifted, so queued work can finish.
    expect(lastModel(applied)?.workerShare).toBe(1);
  });

  it("an online request stuck in flight is evidence: the allowance falls before any online result commits", () => {
    let oldest: number | undefined;
    const { t, clock, events, applied } = throttle(() => oldest);
    t.start();
    for (let i = 0; i < 20; i++) {
      backfillBatch(events);
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.workerShare).toBe(1);
    oldest = clock.now();
    for (let i = 0; i < 4; i++) {
      backfillBatch(events);
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.workerShare).toBeLessThan(1);
    t.stop();
  });
});
