import type { Worker } from "node:worker_threads";
import type { BackfillLimits } from "../../contracts/backfill-limits.js";
import type { WorkerReply } from "../worker-protocol.js";
import type { LaneQueues } from "./lane-queues.js";
import type { PoolJob } from "./pool-job.js";

/**
 * Jobs a worker holds at once: the one it runs and the next one, so it starts the next ORT call
 * without waiting for the main thread to answer its reply (a busy main thread otherwise leaves the
 * worker idle between isolated items). An online call that arrives then waits for at most two
 * calls per worker (docs/lanes.md, "Slices"). Also the most backfill calls the guard lets a worker
 * hold (`workerDepth` at full allowance).
 */
export const JOBS_PER_WORKER = 2;

/** One worker of the pool and the jobs it holds. */
export interface WorkerSlot {
  worker: Worker;
  /** `online`: takes online calls (and backfill calls when the pool has no backfill workers); `backfill`: backfill calls only. */
  role: "online" | "backfill";
  /** Jobs posted to the worker and not answered yet, by job id, in posting order (the worker runs them in turn). */
  inFlight: Map<number, PoolJob>;
  /** Resolves the close() wait once `inFlight` is empty. */
  drained: (() => void) | null;
  /** Backfill jobs posted and not answered. */
  backfillInFlight: number;
  /** performance.now() before which this worker takes no backfill job (the guard's duty cycle). */
  backfillReadyAt: number;
}

/** What the dispatcher sees of its pool. */
export interface DispatcherContext {
  readonly slots: readonly WorkerSlot[];
  readonly queues: LaneQueues<PoolJob>;
  /** Backfill calls go to the online workers: the pool has no backfill worker (or lost them all). */
  backfillShared(): boolean;
  isClosing(): boolean;
}

/**
 * Hands waiting jobs to workers, within the SLO guard's limits on backfill calls (docs/lanes.md,
 * "The levers"): how many a worker may hold (`workerDepth`) and its duty cycle (`workerShare`: after
 * a backfill call of d ms the worker takes its next backfill call d × (1 − share) ÷ share later).
 * Online calls are never limited. The limits arrive as the guard's levers table made them.
 */
export class Dispatcher {
  private limits: Pick<BackfillLimits, "workerShare" | "workerDepth"> = {
    workerShare: 1,
    workerDepth: JOBS_PER_WORKER,
  };
  private nextJobId = 1;
  /** A dispatch scheduled for when a worker's backfill gap ends. */
  private gapTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly ctx: DispatcherContext) {}

  /** The SLO guard's levers on backfill calls, as its table gives them. */
  limitBackfill(limits: Pick<BackfillLimits, "workerShare" | "workerDepth">): void {
    this.limits = { workerShare: limits.workerShare, workerDepth: limits.workerDepth };
    this.dispatch();
  }

  /**
   * Idle workers get a job first, then each worker its next one (up to JOBS_PER_WORKER). Online
   * jobs go to online workers only. Backfill jobs go to the backfill workers, or, when the pool has
   * none, to online workers with no online job waiting; either way only within the guard's limits:
   * depth, and the worker's gap after its last backfill call (its duty cycle).
   */
  dispatch(): void {
    const { slots, queues } = this.ctx;
    const now = performance.now();
    let nextGapEnd = Number.POSITIVE_INFINITY;
    for (let depth = 1; depth <= JOBS_PER_WORKER; depth++) {
      for (const slot of slots) {
        if (slot.inFlight.size >= depth) continue;
        let job = slot.role === "online" ? queues.take("online") : undefined;
        if (
          job === undefined &&
          (slot.role === "backfill" || this.ctx.backfillShared()) &&
          queues.has("backfill") &&
          slot.backfillInFlight < this.limits.workerDepth
        ) {
          if (now >= slot.backfillReadyAt) job = queues.take("backfill");
          else nextGapEnd = Math.min(nextGapEnd, slot.backfillReadyAt);
        }
        if (job === undefined) continue;
        this.post(slot, job);
      }
    }
    if (nextGapEnd !== Number.POSITIVE_INFINITY && this.gapTimer === undefined && !this.ctx.isClosing()) {
      this.gapTimer = setTimeout(
        () => {
          this.gapTimer = undefined;
          this.dispatch();
        },
        Math.max(1, nextGapEnd - now),
      );
      this.gapTimer.unref?.();
    }
  }

  /** A worker answered `job`: a backfill call under a share below 1 starts the worker's gap. */
  answered(slot: WorkerSlot, job: PoolJob, reply: WorkerReply): void {
    if (job.lane !== "backfill") return;
    slot.backfillInFlight = Math.max(0, slot.backfillInFlight - 1);
    const share = this.limits.workerShare;
    if (share >= 1 || reply.type === "failed") return;
    const gapMs = share <= 0 ? 0 : (reply.runMs * (1 - share)) / share;
    slot.backfillReadyAt = performance.now() + gapMs;
  }

  /** No more scheduled dispatches (the pool is closing). */
  stop(): void {
    if (this.gapTimer !== undefined) clearTimeout(this.gapTimer);
    this.gapTimer = undefined;
  }

  private post(slot: WorkerSlot, job: PoolJob): void {
    const id = this.nextJobId++;
    slot.inFlight.set(id, job);
    if (job.lane === "backfill") slot.backfillInFlight++;
    const { request, transfer } = job.message(id);
    slot.worker.postMessage(request, transfer);
  }
}
