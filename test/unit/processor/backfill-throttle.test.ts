import { describe, expect, it } from "vitest";
import type { ModelBackfillLimits } from "../../../src/contracts/backfill-limits.js";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { GUARD } from "../../../src/processor/backfill-guard.js";
import { BackfillThrottle } from "../../../src/processor/backfill-throttle.js";
import { HEADROOM } from "../../../src/processor/cpu-headroom.js";
import { FakeClock } from "../../support/fake-clock.js";

/**
 * A throttle with recording levers, a fake clock, online topic "in" and backfill topic "bf"; a CPU
 * budget of `cpuCores`, a main thread whose CPU is `mainCpu.ms`, and a machine whose idle CPU is
 * `idle.cores` (none read when undefined) with `headroomCores` to keep idle.
 */
function throttle(
  oldestOnline: () => number | undefined = () => undefined,
  budget: { cpuCores: number; mainCpu: { ms: number } } = { cpuCores: 1, mainCpu: { ms: 0 } },
  machine: { headroomCores: number; idle: { cores: number | undefined } } = {
    headroomCores: 0.5,
    idle: { cores: undefined },
  },
) {
  const clock = new FakeClock();
  const events = new SluiceEvents();
  const applied: Array<{
    slots?: number;
    model?: ModelBackfillLimits;
    fetchPaused?: boolean;
  }> = [];
  const t = new BackfillThrottle({
    target: 200,
    cpuCores: budget.cpuCores,
    mainThreadCpuMs: () => budget.mainCpu.ms,
    headroomCores: machine.headroomCores,
    idleCores: () => machine.idle.cores,
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

/** `n` records of `topic` finished as results, `endToEndMs` after their timestamps. */
function finish(events: SluiceEvents, topic: string, n: number, endToEndMs = 20): void {
  for (let i = 0; i < n; i++)
    events.emit("record.outcome", { topic, partition: 0, outcome: "result", status: "ok", endToEndMs });
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

  it("the CPU budget reaches the model as cores: × the allowance, less the main thread's backfill work", () => {
    const mainCpu = { ms: 0 };
    const { t, clock, events, applied } = throttle(undefined, { cpuCores: 1, mainCpu });
    t.start();
    // The first decision already carries the start allowance's part of the budget.
    expect(lastModel(applied)?.cpuCores).toBeCloseTo(GUARD.startAllowance, 6);
    // Calm online traffic and a busy backfill: the allowance reaches 1 and the whole budget with it.
    for (let i = 0; i < 20; i++) {
      backfillBatch(events);
      finish(events, "in", 5);
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.workerShare).toBe(1);
    expect(lastModel(applied)?.cpuCores).toBeCloseTo(1, 6);
    // Now the main thread spends 100 ms of each 250 ms tick (0.4 cores), 3 of 4 records being
    // backfill ones: 0.3 cores of backfill work on the main thread, which the model's part gives up.
    for (let i = 0; i < 20; i++) {
      backfillBatch(events);
      finish(events, "in", 5);
      finish(events, "bf", 15);
      mainCpu.ms += 100;
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.cpuCores).toBeGreaterThan(0.65);
    expect(lastModel(applied)?.cpuCores).toBeLessThan(0.75);
    t.stop();
    // Stopped: no budget, so queued work can finish.
    expect(lastModel(applied)?.cpuCores).toBe(Number.POSITIVE_INFINITY);
  });

  it("keeps idle CPU for the machine: the budget shrinks while less than the headroom is idle, and returns when it is idle again", () => {
    const idle = { cores: 1 as number | undefined };
    const { t, clock, events, applied } = throttle(
      undefined,
      { cpuCores: 1, mainCpu: { ms: 0 } },
      { headroomCores: 0.5, idle },
    );
    t.start();
    const seen: number[] = [];
    const off = events.on("guard.adjusted", (e) => seen.push(e.cpuHeadroomShare));
    const ticks = (n: number) => {
      for (let i = 0; i < n; i++) {
        backfillBatch(events);
        finish(events, "in", 5);
        clock.advance(GUARD.tickMs);
      }
    };
    ticks(20);
    expect(lastModel(applied)?.cpuCores).toBeCloseTo(1, 6);
    // Another process takes the machine: nothing is idle, and the backfill's budget falls to a
    // sixteenth within a few seconds (halved at most every 500 ms), never to 0 on headroom alone.
    idle.cores = 0;
    ticks(20);
    expect(lastModel(applied)?.cpuCores).toBeCloseTo(HEADROOM.floor, 6);
    expect(seen.at(-1)).toBeCloseTo(HEADROOM.floor, 6);
    // The guard's allowance is untouched: the online tail is calm.
    expect(lastModel(applied)?.workerShare).toBe(1);
    // Idle again: the share climbs back, 0.2 per second.
    idle.cores = 1;
    ticks(4);
    expect(lastModel(applied)?.cpuCores).toBeLessThan(0.5);
    ticks(24);
    // Back at the whole budget (within the 5 % the throttle lets the model's cores move unapplied).
    expect(lastModel(applied)?.cpuCores).toBeGreaterThan(0.95);
    expect(seen.at(-1)).toBe(1);
    off();
    t.stop();
  });

  it("a machine whose idle CPU cannot be read leaves the budget as the guard made it", () => {
    const { t, clock, events, applied } = throttle(undefined, undefined, {
      headroomCores: 0.5,
      idle: { cores: undefined },
    });
    t.start();
    for (let i = 0; i < 20; i++) {
      backfillBatch(events);
      finish(events, "in", 5);
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.cpuCores).toBeCloseTo(1, 6);
    t.stop();
  });

  it("a main thread busy with backfill records leaves the model's backfill calls nothing, not less than nothing", () => {
    const mainCpu = { ms: 0 };
    const { t, clock, events, applied } = throttle(undefined, { cpuCores: 0.25, mainCpu });
    t.start();
    for (let i = 0; i < 8; i++) {
      backfillBatch(events);
      finish(events, "bf", 1, 5);
      mainCpu.ms += 200;
      clock.advance(GUARD.tickMs);
    }
    expect(lastModel(applied)?.cpuCores).toBe(0);
    t.stop();
  });
});
