import type { BackfillLimits } from "../contracts/backfill-limits.js";
import type { Lane } from "../contracts/lane.js";
import { JOBS_PER_WORKER } from "../model/pool/dispatcher.js";
import { LatencyWindow } from "./latency-window.js";

/**
 * The controller's constants: one home (docs/lanes.md, "The SLO guard", explains each). Times in ms.
 */
export const GUARD = {
  /** How often the processor asks the guard for a decision. */
  tickMs: 250,
  /** The sliding window of online latencies and model time. */
  windowMs: 3000,
  /** The online tail the guard watches. */
  quantile: 0.99,
  /** Throttle when the online tail reaches this share of the target… */
  engageAt: 0.9,
  /** …and release only below this share (the band between holds: no oscillation). */
  releaseBelow: 0.75,
  /**
   * Multiplicative decrease: × engage threshold ÷ the fresh tail, between these two factors (a tail
   * just over the threshold trims a little; one twice over it halves the allowance).
   */
  decreaseMin: 0.5,
  decreaseMax: 0.9,
  /** Below this allowance the backfill lane is paused (allowance 0). */
  floor: 1 / 16,
  /** Additive increase of the allowance per second of calm (tail under releaseBelow × target). */
  increasePerSecond: 0.1,
  /** In the band between the two shares: a slow creep per second, up to creepLimit (release needs calm). */
  creepPerSecond: 0.02,
  creepLimit: 0.9,
  /**
   * Where backfill work starts (a new run, a process start, a partition moved in by a rebalance,
   * the end of a pause): the allowance waits here while the backfill lane is idle, so the first
   * backfill batch already runs under a decision, and it is earned from there (`rampPerSecond`).
   */
  startAllowance: 1 / 8,
  /**
   * The start phase's multiplicative increase per second while the online tail is calm (under
   * releaseBelow × target, or no online traffic): 1/8 → 1 in 3 s when nothing objects.
   */
  rampPerSecond: 2,
  /** …and in the band between the two shares, up to creepLimit (the band never stops the start). */
  bandRampPerSecond: 1.25,
  /** A decrease waits this long after the previous one, and for requests that started after it. */
  settleMs: 500,
  /** No increase until this long after the last decrease. */
  holdMs: 2000,
  /** Paused this long with the online tail still above the target: the target cannot be met. */
  unmeetableMs: 10_000,
  /** auto target: online samples with no backfill model time in the window, kept this long… */
  baselineWindowMs: 30_000,
  /** …and at least this many of them before they make a baseline. */
  baselineSamples: 20,
  /** auto target = baseline p99 × this + autoMarginMs (the benchmark's goal, docs/lanes.md). */
  autoFactor: 1.5,
  autoMarginMs: 25,
} as const;

/**
 * The guard's target: a fixed number of ms (`lanes.onlineLatencyTargetMs: <ms>`), or `auto`: learned
 * from the online tail while no backfill runs, `untilMeasuredMs` before that is known.
 */
export type GuardTarget = number | { auto: true; untilMeasuredMs: number };

/** A change worth one log line: the guard engaged (allowance fell below 1) or released (back at 1). */
export type GuardTransition = "engaged" | "released" | "unmeetable";

export interface GuardState {
  /**
   * How much of the model and the commit cadence the backfill lane may use: 1 = unthrottled,
   * 0 = paused (no new backfill batches or calls, fetches paused). See `LEVERS`.
   */
  allowance: number;
  /** Online latency (commit time − request timestamp) at GUARD.quantile over the window; undefined without samples. */
  estimateMs: number | undefined;
  /** The target in force (auto: learned; see `GuardTarget`). */
  targetMs: number;
  /** The backfill lane's share of the model's busy time over the window (0..1). */
  backfillModelShare: number;
  transition?: GuardTransition;
}

/**
 * The SLO guard of the backfill lane (docs/lanes.md): an AIMD controller that keeps the online tail
 * a reader sees under `lanes.onlineLatencyTargetMs` by making the backfill lane yield. Pure and
 * per instance (no coordination): every instance on a node sees its own online tail rise when the
 * node is contended, and each backs off. The processor feeds it online latencies as they commit
 * and model time per lane, calls `tick` every GUARD.tickMs and applies the allowance.
 *
 * - **Evidence**: the p99 of online latencies committed in the window, and the age of the oldest
 *   online request still in flight (`observeInFlight`), whichever is larger: a tail building up
 *   behind backfill work counts before those requests commit.
 * - **Decrease** when the tail of online requests that started after the last decrease reaches
 *   engageAt × target: × (threshold ÷ tail), between ×0.5 and ×0.9. Fresh evidence only, so one
 *   slow moment is not punished twice. Below GUARD.floor the allowance is 0: the backfill pauses;
 *   the online lane is never throttled.
 * - **Start cautious**: backfill work starts at GUARD.startAllowance (1/8) — at process start, while
 *   the backfill lane is idle (so a new run starts there), when a backfill partition moves in
 *   (`restart`) and at the end of a pause — and earns its share multiplicatively: ×2 per second
 *   while the tail is under releaseBelow × target (or there is no online traffic), ×1.25 per second
 *   in the band up to engageAt, until it reaches 1 or a decrease ends the start phase.
 * - **Increase** after the start phase (+0.1 per second) when the window's tail is below
 *   releaseBelow × target, or there is no online traffic, and GUARD.holdMs passed since the last
 *   decrease.
 * - Between the two shares it creeps up slowly (+0.02 per second) to at most 0.9, so a backfill
 *   held low by one bad moment recovers toward the engage point; only calm releases it fully, so it
 *   does not cycle between engaged and released under a steady load.
 *
 * With an `auto` target the guard learns what "alone" means where it runs: the online tail (p99) of
 * requests that committed while the backfill lane used no model time for a whole window, and aims
 * at GUARD.autoFactor × that + GUARD.autoMarginMs. A pause is therefore also a measurement: if the
 * machine got slower for everyone, the calm tail it sees while paused raises the target and the
 * backfill resumes; the online lane is never what yields.
 */
export class BackfillGuard {
  private allowanceValue: number = GUARD.startAllowance;
  /** In the start phase: increases are multiplicative until the allowance reaches 1 or a decrease. */
  private starting = true;
  /** Record timestamp of the oldest online request in flight (consumed, not committed), if any. */
  private oldestInFlightMs: number | undefined;
  private engaged = false;
  private lastDecreaseAt = Number.NEGATIVE_INFINITY;
  private lastTickAt: number | undefined;
  private pausedSince: number | undefined;
  private toldUnmeetable = false;
  private readonly online = new LatencyWindow(GUARD.windowMs);
  private readonly modelTime: Record<Lane, LatencyWindow> = {
    online: new LatencyWindow(GUARD.windowMs),
    backfill: new LatencyWindow(GUARD.windowMs),
  };
  /** auto: online samples committed while the backfill lane was idle for a whole window. */
  private readonly calm = new LatencyWindow(GUARD.baselineWindowMs);
  private baselineMs: number | undefined;
  private currentTargetMs: number;

  constructor(private readonly target: GuardTarget) {
    const ms = typeof target === "number" ? target : target.untilMeasuredMs;
    if (!(ms > 0)) throw new RangeError(`BackfillGuard: the target must be > 0 ms, got ${ms}`);
    this.currentTargetMs = ms;
  }

  /** The target in force now, ms. */
  get targetMs(): number {
    return this.currentTargetMs;
  }

  get allowance(): number {
    return this.allowanceValue;
  }

  /** An online request's result committed `latencyMs` after its record timestamp. */
  observeOnline(nowMs: number, latencyMs: number): void {
    const ms = Math.max(0, latencyMs);
    this.online.add(nowMs, ms);
    if (typeof this.target !== "number" && this.modelTime.backfill.sum(nowMs) === 0) this.calm.add(nowMs, ms);
  }

  /** The model spent `ms` on a batch of `lane`. */
  observeModel(nowMs: number, lane: Lane, ms: number): void {
    this.modelTime[lane].add(nowMs, Math.max(0, ms));
  }

  /**
   * The record timestamp of the oldest online request still in flight now (queued or in the model;
   * undefined when none is). Its age counts as evidence beside the committed latencies, so a tail
   * that is building up behind backfill work is seen before those requests commit.
   */
  observeInFlight(oldestTimestampMs: number | undefined): void {
    this.oldestInFlightMs = oldestTimestampMs;
  }

  /**
   * Backfill work starts afresh (a partition of the backfill lane moved in): back to at most
   * GUARD.startAllowance, earned again from there.
   */
  restart(): void {
    this.allowanceValue = Math.min(this.allowanceValue, GUARD.startAllowance);
    this.starting = true;
  }

  tick(nowMs: number): GuardState {
    const dtMs = this.lastTickAt === undefined ? GUARD.tickMs : Math.max(0, nowMs - this.lastTickAt);
    this.lastTickAt = nowMs;
    this.learnTarget(nowMs);
    const target = this.currentTargetMs;
    const inFlightAgeMs = this.oldestInFlightMs === undefined ? undefined : nowMs - this.oldestInFlightMs;
    const estimateMs = maxOf(this.online.quantile(GUARD.quantile, nowMs), inFlightAgeMs);
    // Fresh evidence: requests that started after the last decrease, committed or still in flight.
    const freshInFlight =
      this.oldestInFlightMs !== undefined && this.oldestInFlightMs >= this.lastDecreaseAt
        ? inFlightAgeMs
        : undefined;
    const fresh = maxOf(this.online.quantile(GUARD.quantile, nowMs, this.lastDecreaseAt), freshInFlight);
    const engageMs = GUARD.engageAt * target;
    const calmed = nowMs - this.lastDecreaseAt >= GUARD.holdMs;
    // An idle backfill lane waits at the start allowance: whatever starts next starts there.
    const backfillIdle = this.modelTime.backfill.count(nowMs) === 0;
    if (backfillIdle) this.starting = true;
    const ceiling = backfillIdle ? GUARD.startAllowance : 1;
    const calm = estimateMs === undefined || estimateMs < GUARD.releaseBelow * target;
    const inBand = estimateMs !== undefined && estimateMs < engageMs;
    let decreased = false;
    if (
      fresh !== undefined &&
      fresh >= engageMs &&
      this.allowanceValue > 0 &&
      nowMs - this.lastDecreaseAt >= GUARD.settleMs
    ) {
      const factor = Math.min(GUARD.decreaseMax, Math.max(GUARD.decreaseMin, engageMs / fresh));
      const next = this.allowanceValue * factor;
      this.allowanceValue = next < GUARD.floor ? 0 : next;
      this.lastDecreaseAt = nowMs;
      this.starting = false;
      decreased = true;
    } else if ((calm || inBand) && calmed && this.allowanceValue < ceiling) {
      // The end of a pause is a start too: earned again from the floor.
      if (this.allowanceValue === 0) this.starting = true;
      const from = Math.max(this.allowanceValue, GUARD.floor);
      const seconds = dtMs / 1000;
      const limit = Math.min(ceiling, calm ? 1 : GUARD.creepLimit);
      const next = this.starting
        ? from * (calm ? GUARD.rampPerSecond : GUARD.bandRampPerSecond) ** seconds
        : from + (calm ? GUARD.increasePerSecond : GUARD.creepPerSecond) * seconds;
      this.allowanceValue = Math.max(this.allowanceValue, Math.min(limit, next));
      if (this.allowanceValue >= 1) this.starting = false;
    }
    if (this.allowanceValue > ceiling) this.allowanceValue = ceiling;
    const state: GuardState = {
      allowance: this.allowanceValue,
      estimateMs,
      targetMs: target,
      backfillModelShare: this.backfillModelShare(nowMs),
    };
    const transition = this.transition(decreased, nowMs, estimateMs);
    if (transition !== undefined) state.transition = transition;
    return state;
  }

  /** Engaged = decreased for the online tail, until the allowance is back at 1. */
  private transition(
    decreased: boolean,
    nowMs: number,
    estimateMs: number | undefined,
  ): GuardTransition | undefined {
    const now = this.allowanceValue;
    if (now > 0) {
      this.pausedSince = undefined;
      this.toldUnmeetable = false;
    } else {
      this.pausedSince ??= nowMs;
    }
    if (decreased && !this.engaged) {
      this.engaged = true;
      return "engaged";
    }
    if (this.engaged && now === 1) {
      this.engaged = false;
      return "released";
    }
    if (
      this.pausedSince !== undefined &&
      !this.toldUnmeetable &&
      nowMs - this.pausedSince >= GUARD.unmeetableMs &&
      estimateMs !== undefined &&
      estimateMs >= this.currentTargetMs
    ) {
      this.toldUnmeetable = true;
      return "unmeetable";
    }
    return undefined;
  }

  /** auto: a baseline from enough calm samples replaces the previous one; the target follows it. */
  private learnTarget(nowMs: number): void {
    if (typeof this.target === "number") return;
    if (this.calm.count(nowMs) >= GUARD.baselineSamples)
      this.baselineMs = this.calm.quantile(GUARD.quantile, nowMs);
    if (this.baselineMs !== undefined)
      this.currentTargetMs = GUARD.autoFactor * this.baselineMs + GUARD.autoMarginMs;
  }

  private backfillModelShare(nowMs: number): number {
    const backfill = this.modelTime.backfill.sum(nowMs);
    const total = backfill + this.modelTime.online.sum(nowMs);
    return total > 0 ? backfill / total : 0;
  }
}

/**
 * The least share of the slice budget and of the commit cadence a throttled backfill keeps: its
 * slices stay at least a quarter of `model.backfillSliceMs`, and its partitions commit at most four
 * `lanes.backfillCommitIntervalMs` apart (spaced, never held: held commits went out in bursts).
 */
export const MIN_SHARE = 0.25;

/** One lever's value in a band of the table, from the allowance a and `batching.maxInFlightBatches`. */
type Lever<T> = (a: number, maxInFlightBatches: number) => T;

/** A row of the levers table: an allowance band and what each lever is in it. */
export type LeverRow = {
  /** The band, as docs/lanes.md's first column names it. */
  readonly allowance: "1" | "0 < a < 1" | "0";
  readonly holds: (a: number) => boolean;
} & { readonly [K in keyof BackfillLimits]: Lever<BackfillLimits[K]> };

const is =
  <T>(value: T): Lever<T> =>
  () =>
    value;
const theAllowance: Lever<number> = (a) => a;
const allowanceAtLeastMin: Lever<number> = (a) => Math.max(a, MIN_SHARE);
const maxInFlight: Lever<number> = (_a, maxInFlightBatches) => maxInFlightBatches;

/**
 * What an allowance means for each of the backfill lane's levers: docs/lanes.md's levers table, row
 * by row (test/unit/processor/backfill-levers-doc.test.ts reads that table and checks it says this).
 * The one home of every lever's value and bound: the parts that take a lever (the batcher's slots,
 * the pool's duty cycle and depth, the runner's slices, the CPU budget, the committers' cadence, the fetches) use it
 * as it comes, unclamped.
 */
// biome-ignore format: a table, aligned like the one in docs/lanes.md
export const LEVERS: readonly LeverRow[] = [
  { allowance: "1",         holds: (a) => a >= 1, batchSlots: maxInFlight, workerShare: is(1),        workerDepth: is(JOBS_PER_WORKER), sliceShare: is(1),               cpuShare: is(1),        commitShare: is(1),               fetchPaused: is(false) },
  { allowance: "0 < a < 1", holds: (a) => a > 0,  batchSlots: is(1),       workerShare: theAllowance, workerDepth: is(1),               sliceShare: allowanceAtLeastMin, cpuShare: theAllowance, commitShare: allowanceAtLeastMin, fetchPaused: is(false) },
  { allowance: "0",         holds: () => true,    batchSlots: is(0),       workerShare: is(0),        workerDepth: is(0),               sliceShare: is(0),               cpuShare: is(0),        commitShare: is(MIN_SHARE),       fetchPaused: is(true) },
];

/** The levers for allowance `a` (0..1, as the guard keeps it): the first row of LEVERS whose band holds it. */
export function backfillLimits(a: number, maxInFlightBatches: number): BackfillLimits {
  const row = LEVERS.find((r) => r.holds(a)) as LeverRow;
  return {
    batchSlots: row.batchSlots(a, maxInFlightBatches),
    workerShare: row.workerShare(a, maxInFlightBatches),
    workerDepth: row.workerDepth(a, maxInFlightBatches),
    sliceShare: row.sliceShare(a, maxInFlightBatches),
    cpuShare: row.cpuShare(a, maxInFlightBatches),
    commitShare: row.commitShare(a, maxInFlightBatches),
    fetchPaused: row.fetchPaused(a, maxInFlightBatches),
  };
}

/** The larger of two optional numbers (undefined when both are). */
function maxOf(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.max(a, b);
}
