import { describe, expect, it } from "vitest";
import {
  BackfillGuard,
  backfillLimits,
  GUARD,
  type GuardState,
} from "../../../src/processor/backfill-guard.js";
import { LatencyWindow } from "../../../src/processor/latency-window.js";

/**
 * Drives a guard with a fake clock: every `sampleEveryMs` an online request commits with the
 * latency `latencyAt(now, allowance)` (a plant), and the guard ticks every GUARD.tickMs.
 */
function simulate(
  guard: BackfillGuard,
  opts: {
    fromMs?: number;
    forMs: number;
    sampleEveryMs?: number;
    latencyAt: (nowMs: number, allowance: number) => number | undefined;
    /** The backfill lane uses the model meanwhile (default true). */
    backfillBusy?: boolean;
  },
): GuardState[] {
  const states: GuardState[] = [];
  const every = opts.sampleEveryMs ?? 100;
  const from = opts.fromMs ?? 0;
  let nextSample = from;
  for (let t = from + GUARD.tickMs; t <= from + opts.forMs; t += GUARD.tickMs) {
    for (; nextSample <= t; nextSample += every) {
      if (opts.backfillBusy ?? true) guard.observeModel(nextSample, "backfill", 10);
      const latency = opts.latencyAt(nextSample, guard.allowance);
      if (latency !== undefined) guard.observeOnline(nextSample, latency);
    }
    states.push(guard.tick(t));
  }
  return states;
}

const transitions = (states: GuardState[]) => states.flatMap((s) => (s.transition ? [s.transition] : []));

/** A guard past its start phase: 5 s of busy backfill beside calm online traffic (allowance 1). */
function running(target: number): BackfillGuard {
  const guard = new BackfillGuard(target);
  simulate(guard, { forMs: 5000, latencyAt: () => 0.2 * target });
  expect(guard.allowance).toBe(1);
  return guard;
}

describe("BackfillGuard (AIMD, fake clock)", () => {
  const target = 200;

  it("starts cautious at the start allowance and earns full speed in 3 s while the online tail is well under the target", () => {
    const guard = new BackfillGuard(target);
    expect(guard.allowance).toBe(GUARD.startAllowance);
    const states = simulate(guard, { forMs: 20_000, latencyAt: () => 80 });
    // ×2 per second: 1/8 → 1 in three seconds (one tick more for rounding), never a step down.
    expect(states[0]?.allowance).toBeCloseTo(GUARD.startAllowance * 2 ** 0.25);
    const full = states.findIndex((s) => s.allowance === 1);
    expect((full + 1) * GUARD.tickMs).toBeGreaterThanOrEqual(3000);
    expect((full + 1) * GUARD.tickMs).toBeLessThanOrEqual(3000 + GUARD.tickMs);
    expect(states.slice(full).every((s) => s.allowance === 1)).toBe(true);
    expect(transitions(states)).toEqual([]);
    expect(states.at(-1)?.estimateMs).toBe(80);
    expect(states.at(-1)?.targetMs).toBe(target);
  });

  it("engages when the tail nears the target: trims the allowance, once per fresh evidence", () => {
    const guard = running(target);
    // 0.95 × target: above engageAt (0.9), so every fresh decision decreases.
    const states = simulate(guard, { fromMs: 5000, forMs: 1000, latencyAt: () => 0.95 * target });
    expect(transitions(states)).toEqual(["engaged"]);
    const first = states.findIndex((s) => s.allowance < 1);
    // Just over the threshold: a trim (× 0.9 at most), not a halving.
    expect(states[first]?.allowance).toBeCloseTo(0.9);
    // The next decrease waits GUARD.settleMs and for requests that started after the first one.
    const second = states.findIndex((s) => s.allowance < (states[first]?.allowance ?? 0));
    expect((second - first) * GUARD.tickMs).toBeGreaterThanOrEqual(GUARD.settleMs);
  });

  it("one slow moment is punished once: old samples in the window do not decrease it again", () => {
    const guard = running(target);
    // 1 s of slow requests, then requests in the hold band (0.75–0.9 × target).
    const states = simulate(guard, {
      fromMs: 5000,
      forMs: 6000,
      latencyAt: (now) => (now < 6000 ? 1.5 * target : 0.8 * target),
    });
    const decreases = states.filter((s, i) => i > 0 && s.allowance < (states[i - 1] as GuardState).allowance);
    // Requests that started in the slow second may commit during it: at most two halvings.
    expect(decreases.length).toBeGreaterThanOrEqual(1);
    expect(decreases.length).toBeLessThanOrEqual(2);
    // In the band it only creeps (+0.02/s), toward 0.9 at most.
    const tail = states.slice(-8).map((s) => s.allowance);
    expect(Math.max(...tail) - Math.min(...tail)).toBeLessThanOrEqual(0.02 * 2 + 1e-9);
    expect(Math.max(...tail)).toBeLessThanOrEqual(0.9);
  });

  it("releases gradually when online is calm (additive increase), and says so once", () => {
    const guard = running(target);
    const states = simulate(guard, {
      fromMs: 5000,
      forMs: 30_000,
      latencyAt: (now) => (now < 6000 ? 2 * target : 0.3 * target),
    });
    const low = Math.min(...states.map((s) => s.allowance));
    expect(low).toBeLessThan(0.5);
    expect(low).toBeGreaterThan(0);
    for (let i = 1; i < states.length; i++) {
      const rise = (states[i] as GuardState).allowance - (states[i - 1] as GuardState).allowance;
      // Never more than GUARD.increasePerSecond per second of ticks (plus the floor's first step).
      expect(rise).toBeLessThanOrEqual(GUARD.floor + (GUARD.increasePerSecond * GUARD.tickMs) / 1000 + 1e-9);
    }
    expect(states.at(-1)?.allowance).toBe(1);
    expect(transitions(states)).toEqual(["engaged", "released"]);
  });

  it("no oscillation under a steady load: it settles under the engage share, engaging at most once, never released", () => {
    // Plant: online latency grows with the backfill's allowance (a contended core).
    const plant = (_now: number, allowance: number) => 60 + 120 * allowance;
    for (const guard of [new BackfillGuard(target), running(target)]) {
      const states = simulate(guard, { forMs: 120_000, latencyAt: plant });
      // A cautious start settles in the band without overshooting; one at full speed engages once.
      expect(transitions(states).filter((t) => t !== "engaged")).toEqual([]);
      expect(transitions(states).length).toBeLessThanOrEqual(1);
      const lastMinute = states.slice(-240).map((s) => s.allowance);
      expect(Math.max(...lastMinute) - Math.min(...lastMinute)).toBeLessThan(0.05);
      // Settled where the tail is under the engage share of the target.
      const settled = lastMinute.at(-1) as number;
      expect(plant(0, settled)).toBeLessThan(GUARD.engageAt * target);
      expect(settled).toBeGreaterThan(0.5);
    }
  });

  it("a target that cannot be met pauses the backfill (allowance 0), never the online lane, and says so once", () => {
    const guard = new BackfillGuard(target);
    const states = simulate(guard, { forMs: 30_000, latencyAt: () => 2 * target });
    expect(states.at(-1)?.allowance).toBe(0);
    expect(transitions(states)).toEqual(["engaged", "unmeetable"]);
    const paused = backfillLimits(0, 2);
    expect(paused).toEqual({
      batchSlots: 0,
      workerShare: 0,
      workerDepth: 0,
      sliceShare: 0,
      cpuShare: 0,
      commitShare: 0.25,
      fetchPaused: true,
    });
  });

  it("without online traffic the backfill is released (no samples = calm)", () => {
    const guard = new BackfillGuard(target);
    simulate(guard, { forMs: 6000, latencyAt: () => 3 * target });
    expect(guard.allowance).toBe(0);
    const quiet = simulate(guard, { fromMs: 6000, forMs: 20_000, latencyAt: () => undefined });
    expect(quiet.at(-1)?.allowance).toBe(1);
    expect(quiet.at(-1)?.estimateMs).toBeUndefined();
  });

  it("reports the backfill lane's share of the model's time over the window", () => {
    const guard = new BackfillGuard(target);
    guard.observeModel(1000, "backfill", 300);
    guard.observeModel(1100, "online", 100);
    expect(guard.tick(1200).backfillModelShare).toBeCloseTo(0.75);
    expect(guard.tick(1000 + GUARD.windowMs + 200).backfillModelShare).toBe(0);
  });

  it("auto target: learned from the online tail while no backfill runs (1.5 × p99 + 25 ms), a pause re-measures it", () => {
    const guard = new BackfillGuard({ auto: true, untilMeasuredMs: 210 });
    expect(guard.tick(0).targetMs).toBe(210);
    // Online alone at 300 ms (a slow machine): above the start value, but no backfill ran, so the
    // guard learns that this is what alone means here.
    const alone = simulate(guard, { forMs: 5000, latencyAt: () => 300, backfillBusy: false });
    expect(alone.at(-1)?.targetMs).toBe(1.5 * 300 + GUARD.autoMarginMs);
    // A backfill starts; online rises with its allowance, to 420 ms at full speed: under 0.9 × 475,
    // so it is not throttled again, and it recovers from what the 210 ms start value did before
    // the baseline was known (up to the creep limit; full release needs calm).
    const beside = simulate(guard, {
      fromMs: 5000,
      forMs: 40_000,
      latencyAt: (now, allowance) => {
        guard.observeModel(now, "backfill", 50);
        return 300 + 120 * allowance;
      },
    });
    expect(beside.every((s, i) => i === 0 || s.allowance >= (beside[i - 1] as GuardState).allowance)).toBe(
      true,
    );
    expect(beside.at(-1)?.allowance).toBeGreaterThanOrEqual(0.9);
    // Samples while the backfill runs do not move the baseline.
    expect(beside.at(-1)?.targetMs).toBe(475);
    // Beside at 600 ms: over the target, so it throttles.
    const worse = simulate(guard, {
      fromMs: 25_000,
      forMs: 5000,
      latencyAt: (now) => {
        guard.observeModel(now, "backfill", 50);
        return 600;
      },
    });
    expect(worse.at(-1)?.allowance).toBeLessThan(1);
  });

  it("an idle backfill lane waits at the start allowance, and earns full speed", () => {
    const guard = new BackfillGuard(200);
    const idle = simulate(guard, { forMs: 5000, latencyAt: () => 50, backfillBusy: false });
    expect(idle.every((s) => s.allowance === GUARD.startAllowance)).toBe(true);
    expect(transitions(idle)).toEqual([]);
    const busy = simulate(guard, { fromMs: 5000, forMs: 10_000, latencyAt: () => 50 });
    expect(busy.at(-1)?.allowance).toBe(1);
    expect(transitions(busy)).toEqual([]);
    // The lane idles again (a run ended): the next run starts cautious too.
    const after = simulate(guard, { fromMs: 15_000, forMs: 5000, latencyAt: () => 50, backfillBusy: false });
    expect(after.at(-1)?.allowance).toBe(GUARD.startAllowance);
    // No online traffic: nothing objects, so the ramp alone sets the pace.
    const quiet = new BackfillGuard(200);
    const alone = simulate(quiet, { forMs: 4000, latencyAt: () => undefined });
    expect((alone.findIndex((s) => s.allowance === 1) + 1) * GUARD.tickMs).toBeLessThanOrEqual(
      3000 + GUARD.tickMs,
    );
  });

  it("the start of backfill work: a partition moved in, the end of a pause and the band all start cautious and earn", () => {
    // A partition moved in while running at full speed: back to the start allowance at once.
    const guard = running(200);
    guard.restart();
    expect(guard.allowance).toBe(GUARD.startAllowance);
    const again = simulate(guard, { fromMs: 5000, forMs: 4000, latencyAt: () => 40 });
    expect(again.at(-1)?.allowance).toBe(1);
    // The end of a pause: from the floor, ×2 per second while calm (not +0.1 per second).
    const paused = new BackfillGuard(200);
    simulate(paused, { forMs: 6000, latencyAt: () => 600 });
    expect(paused.allowance).toBe(0);
    const resumed = simulate(paused, { fromMs: 6000, forMs: 12_000, latencyAt: () => 40 });
    const first = resumed.findIndex((s) => s.allowance > 0);
    const full = resumed.findIndex((s) => s.allowance === 1);
    expect((full - first) * GUARD.tickMs).toBeLessThanOrEqual(4250);
    // In the band (0.75–0.9 × target) the start goes on at ×1.25 per second, up to creepLimit.
    const band = new BackfillGuard(200);
    const states = simulate(band, { forMs: 12_000, latencyAt: () => 0.8 * 200 });
    expect(states.at(-1)?.allowance).toBeCloseTo(GUARD.creepLimit);
    expect(transitions(states)).toEqual([]);
  });

  it("counts the age of online requests still in flight: a tail building up decreases before it commits", () => {
    const guard = running(200);
    // Nothing commits from 5 s on; the oldest online request in flight arrived at 5.1 s.
    let t = 5000;
    const states: GuardState[] = [];
    for (; t <= 6000; t += GUARD.tickMs) {
      guard.observeModel(t, "backfill", 10);
      guard.observeInFlight(t >= 5100 ? 5100 : undefined);
      states.push(guard.tick(t));
    }
    // At 5.25 s its age is 150 ms (under 0.9 × 200); at 5.5 s 400 ms: over it, so the guard trims.
    expect(states[0]?.allowance).toBe(1);
    expect(guard.allowance).toBeLessThan(1);
    expect(transitions(states)).toEqual(["engaged"]);
    // A request that arrived before the last decrease is no fresh evidence: no second decrease for it.
    const after = guard.allowance;
    for (let i = 0; i < 8; i++, t += GUARD.tickMs) {
      guard.observeModel(t, "backfill", 10);
      guard.observeOnline(t, 50);
      guard.tick(t);
    }
    expect(guard.allowance).toBeGreaterThanOrEqual(after * GUARD.decreaseMin);
  });

  it("a fixed target is never learned", () => {
    const guard = new BackfillGuard(200);
    const states = simulate(guard, { forMs: 5000, latencyAt: () => 300, backfillBusy: false });
    expect(states.every((s) => s.targetMs === 200)).toBe(true);
  });

  it("rejects a target that is not positive", () => {
    expect(() => new BackfillGuard(0)).toThrow(/must be > 0 ms/);
  });
});

describe("backfillLimits: what an allowance means for each lever", () => {
  it("unthrottled at 1, one slot and one call per worker with a duty cycle in between", () => {
    expect(backfillLimits(1, 3)).toEqual({
      batchSlots: 3,
      workerShare: 1,
      workerDepth: 2,
      sliceShare: 1,
      cpuShare: 1,
      commitShare: 1,
      fetchPaused: false,
    });
    expect(backfillLimits(0.5, 3)).toEqual({
      batchSlots: 1,
      workerShare: 0.5,
      workerDepth: 1,
      sliceShare: 0.5,
      cpuShare: 0.5,
      commitShare: 0.5,
      fetchPaused: false,
    });
    expect(backfillLimits(0.05, 3)).toMatchObject({ sliceShare: 0.25, commitShare: 0.25, workerShare: 0.05 });
  });
});

describe("LatencyWindow", () => {
  it("keeps the last windowMs, and filters by start time (end − duration)", () => {
    const w = new LatencyWindow(1000);
    w.add(100, 50);
    w.add(500, 400); // started at 100
    w.add(900, 10); // started at 890
    expect(w.sum(900)).toBe(460);
    expect(w.quantile(0.99, 900)).toBe(400);
    expect(w.quantile(0.5, 900)).toBe(50);
    expect(w.quantile(0.99, 900, 200)).toBe(10);
    expect(w.quantile(0.99, 1550)).toBe(10);
    expect(w.quantile(0.99, 5000)).toBeUndefined();
  });

  it("is bounded: only the newest maxSamples are kept", () => {
    const w = new LatencyWindow(60_000, 10);
    for (let i = 0; i < 1000; i++) w.add(i, i);
    expect(w.quantile(0, 1000)).toBe(990);
  });
});
