import type { Worker } from "node:worker_threads";
import type { ModelBackfillLimits } from "../../contracts/backfill-limits.js";
import type { WorkerReply } from "../worker-protocol.js";
import { CpuBudget } from "./cpu-budget.js";
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
 * "The levers"): how many a worker may hold (`workerDepth`), its duty cycle (`workerShare`: after
 * a backfill call of d ms the worker takes its next backfill call d × (1 − share) ÷ share later),
 * and the lane's CPU budget (`cpuCores`, "The CPU budget": every backfill call's measured CPU is
 * charged to one bucket for the whole pool, no backfill call starts while it is in debt, and at most
 * ⌈cpuCores⌉ workers hold backfill calls at once).
 * Online calls are never limited. The limits arrive as the guard's levers table made them.
 */
export class Dispatcher {
  private limits: Pick<ModelBackfillLimits, "workerShare" | "workerDepth"> = {
    workerShare: 1,
    workerDepth: JOBS_PER_WORKER,
  };
  private readonly budget = new CpuBudget(performance.now());
  private nextJobId = 1;
  /** A dispatch scheduled for when a worker's backfill gap ends. */
  private gapTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly ctx: DispatcherContext) {}

  /** The SLO guard's levers on backfill calls, as its table gives them. */
  limitBackfill(limits: Pick<ModelBackfillLimits, "workerShare" | "workerDepth" | "cpuCores">): void {
    this.limits = { workerShare: limits.workerShare, workerDepth: limits.workerDepth };
    this.budget.setCores(limits.cpuCores, performance.now());
    this.dispatch();
  }

  /**
   * Idle workers get a job first, then each worker its next one (up to JOBS_PER_WORKER). Online
   * jobs go to online workers only. Backfill jobs go to the backfill workers, or, when the pool has
   * none, to online workers with no online job waiting; either way only within the guard's limits:
   * depth, the worker's gap after its last backfill call (its duty cycle) and the CPU budget.
   */
  dispatch(): void {
    const { slots, queues } = this.ctx;
    const now = performance.now();
    let nextGapEnd = Number.POSITIVE_INFINITY;
    // Calls started in this pass are charged when they answer: the budget's verdict holds for the pass.
    const budgetReadyAt = this.budget.readyAt(now);
    // Workers running backfill calls at once: at most the budget's cores, rounded up, so a budget of
    // half a core is one thread at half duty, not two threads bursting together.
    const maxBackfillWorkers = Math.max(1, Math.ceil(this.budget.cores));
    let backfillWorkers = slots.filter((s) => s.backfillInFlight > 0).length;
    for (let depth = 1; depth <= JOBS_PER_WORKER; depth++) {
      for (const slot of slots) {
        if (slot.inFlight.size >= depth) continue;
        let job = slot.role === "online" ? queues.take("online") : undefined;
        if (
          job === undefined &&
          (slot.role === "backfill" || this.ctx.backfillShared()) &&
          queues.has("backfill") &&
          slot.backfillInFlight < this.limits.workerDepth &&
          (slot.backfillInFlight > 0 || backfillWorkers < maxBackfillWorkers)
        ) {
          const readyAt = Math.max(slot.backfillReadyAt, budgetReadyAt);
          if (now >= readyAt) {
            job = queues.take("backfill");
            if (slot.backfillInFlight === 0) backfillWorkers++;
          } else if (readyAt !== Number.POSITIVE_INFINITY) nextGapEnd = Math.min(nextGapEnd, readyAt);
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

  /**
   * A worker answered `job`: a backfill call's CPU is charged to the budget, and under a share below 1
   * it starts the worker's gap.
   */
  answered(slot: WorkerSlot, job: PoolJob, reply: WorkerReply): void {
    if (job.lane !== "backfill") return;
    slot.backfillInFlight = Math.max(0, slot.backfillInFlight - 1);
    if (reply.type !== "failed") this.budget.charge(reply.cpuMs, performance.now());
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
