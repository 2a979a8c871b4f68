import type { Lane } from "../contracts/lane.js";
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
  engageAt: 0.8,
  /** …and release only below this share (the band between holds: no oscillation). */
  releaseBelow: 0.6,
  /** Multiplicative decrease of the allowance. */
  decrease: 0.5,
  /** Below this allowance the backfill lane is paused (allowance 0). */
  floor: 1 / 16,
  /** Additive increase of the allowance per second of calm. */
  increasePerSecond: 0.1,
  /** A decrease waits this long after the previous one, and for requests that started after it. */
  settleMs: 500,
  /** No increase until this long after the last decrease. */
  holdMs: 2000,
  /** Paused this long with the online tail still above the target: the target cannot be met. */
  unmeetableMs: 10_000,
} as const;

/** A change worth one log line: the guard engaged (allowance fell below 1) or released (back at 1). */
export type GuardTransition = "engaged" | "released" | "unmeetable";

export interface GuardState {
  /**
   * How much of the model and the commit cadence the backfill lane may use: 1 = unthrottled,
   * 0 = paused (no new backfill batches, fetches paused, commits held). See `backfillLimits`.
   */
  allowance: number;
  /** Online latency (commit time − request timestamp) at GUARD.quantile over the window; undefined without samples. */
  estimateMs: number | undefined;
  targetMs: number;
  /** The backfill lane's share of the model's busy time over the window (0..1). */
  backfillShare: number;
  transition?: GuardTransition;
}

/**
 * The SLO guard of the backfill lane (docs/lanes.md): an AIMD controller that keeps the online tail
 * a reader sees under `lanes.onlineLatencyTargetMs` by making the backfill lane yield. Pure and
 * per instance (no coordination): every instance on a node sees its own online tail rise when the
 * node is contended, and each backs off. The processor feeds it online latencies as they commit
 * and model time per lane, calls `tick` every GUARD.tickMs and applies the allowance.
 *
 * - **Decrease** (×0.5) when the tail of online requests that started after the last decrease
 *   reaches engageAt × target: fresh evidence only, so one slow moment is not punished twice.
 *   Below GUARD.floor the allowance is 0: the backfill pauses; the online lane is never throttled.
 * - **Increase** (+0.1 per second) when the window's tail is below releaseBelow × target, or there
 *   is no online traffic, and GUARD.holdMs passed since the last decrease.
 * - Between the two shares it holds.
 */
export class BackfillGuard {
  private allowanceValue = 1;
  private lastDecreaseAt = Number.NEGATIVE_INFINITY;
  private lastTickAt: number | undefined;
  private pausedSince: number | undefined;
  private toldUnmeetable = false;
  private readonly online = new LatencyWindow(GUARD.windowMs);
  private readonly modelTime: Record<Lane, LatencyWindow> = {
    online: new LatencyWindow(GUARD.windowMs),
    backfill: new LatencyWindow(GUARD.windowMs),
  };

  constructor(readonly targetMs: number) {
    if (!(targetMs > 0)) throw new RangeError(`BackfillGuard: targetMs must be > 0, got ${targetMs}`);
  }

  get allowance(): number {
    return this.allowanceValue;
  }

  /** An online request's result committed `latencyMs` after its record timestamp. */
  observeOnline(nowMs: number, latencyMs: number): void {
    this.online.add(nowMs, Math.max(0, latencyMs));
  }

  /** The model spent `ms` on a batch of `lane`. */
  observeModel(nowMs: number, lane: Lane, ms: number): void {
    this.modelTime[lane].add(nowMs, Math.max(0, ms));
  }

  tick(nowMs: number): GuardState {
    const dtMs = this.lastTickAt === undefined ? GUARD.tickMs : Math.max(0, nowMs - this.lastTickAt);
    this.lastTickAt = nowMs;
    const before = this.allowanceValue;
    const estimateMs = this.online.quantile(GUARD.quantile, nowMs);
    const fresh = this.online.quantile(GUARD.quantile, nowMs, this.lastDecreaseAt);
    if (
      fresh !== undefined &&
      fresh >= GUARD.engageAt * this.targetMs &&
      this.allowanceValue > 0 &&
      nowMs - this.lastDecreaseAt >= GUARD.settleMs
    ) {
      const next = this.allowanceValue * GUARD.decrease;
      this.allowanceValue = next < GUARD.floor ? 0 : next;
      this.lastDecreaseAt = nowMs;
    } else if (
      (estimateMs === undefined || estimateMs < GUARD.releaseBelow * this.targetMs) &&
      nowMs - this.lastDecreaseAt >= GUARD.holdMs &&
      this.allowanceValue < 1
    ) {
      const from = this.allowanceValue === 0 ? GUARD.floor : this.allowanceValue;
      this.allowanceValue = Math.min(1, from + (GUARD.increasePerSecond * dtMs) / 1000);
    }
    const state: GuardState = {
      allowance: this.allowanceValue,
      estimateMs,
      targetMs: this.targetMs,
      backfillShare: this.backfillShare(nowMs),
    };
    const transition = this.transition(before, nowMs, estimateMs);
    if (transition !== undefined) state.transition = transition;
    return state;
  }

  private transition(
    before: number,
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
    if (before === 1 && now < 1) return "engaged";
    if (before < 1 && now === 1) return "released";
    if (
      this.pausedSince !== undefined &&
      !this.toldUnmeetable &&
      nowMs - this.pausedSince >= GUARD.unmeetableMs &&
      estimateMs !== undefined &&
      estimateMs >= this.targetMs
    ) {
      this.toldUnmeetable = true;
      return "unmeetable";
    }
    return undefined;
  }

  private backfillShare(nowMs: number): number {
    const backfill = this.modelTime.backfill.sum(nowMs);
    const total = backfill + this.modelTime.online.sum(nowMs);
    return total > 0 ? backfill / total : 0;
  }
}

/** What an allowance means for each of the backfill lane's levers (one home; docs/lanes.md). */
export interface BackfillLimits {
  /** Backfill batches in flight at once (LaneBatcher slots); 0 = no new backfill batch forms. */
  batchSlots: number;
  /**
   * Share of each worker's time that backfill ORT calls may take (duty cycle; the pool waits
   * `call time × (1 − share) ÷ share` before a worker's next backfill call). 1 = no gap.
   */
  workerShare: number;
  /** Backfill calls a worker may hold at once (the one it runs and the next; 1 under the guard). */
  workerDepth: number;
  /** Backfill slices' time budget, as a share of `model.backfillSliceMs`. */
  sliceShare: number;
  /** Backfill partitions commit every commitIntervalMs ÷ this (at most ×10); 0 = hold commits. */
  commitShare: number;
  /** Backfill fetches paused. */
  fetchPaused: boolean;
}

export function backfillLimits(allowance: number, maxInFlightBatches: number): BackfillLimits {
  if (allowance >= 1)
    return {
      batchSlots: maxInFlightBatches,
      workerShare: 1,
      workerDepth: 2,
      sliceShare: 1,
      commitShare: 1,
      fetchPaused: false,
    };
  if (allowance <= 0)
    return {
      batchSlots: 0,
      workerShare: 0,
      workerDepth: 0,
      sliceShare: 0,
      commitShare: 0,
      fetchPaused: true,
    };
  return {
    batchSlots: 1,
    workerShare: allowance,
    workerDepth: 1,
    sliceShare: Math.max(allowance, 0.25),
    commitShare: Math.max(allowance, 0.1),
    fetchPaused: false,
  };
}
