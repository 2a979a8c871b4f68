import type { Worker } from "node:worker_threads";
import { SluiceError } from "../../sluice-error.js";
import type { WorkerReply } from "../worker-protocol.js";
import type { Dispatcher, WorkerSlot } from "./dispatcher.js";
import type { LaneQueues } from "./lane-queues.js";
import type { PoolJob } from "./pool-job.js";

/** What the lifecycle sees of its pool. */
export interface WorkerLifecycleContext {
  /** The pool's workers; the lifecycle adds and removes them. */
  readonly slots: WorkerSlot[];
  readonly queues: LaneQueues<PoolJob>;
  readonly dispatcher: Pick<Dispatcher, "dispatch" | "answered">;
  /** Starts a worker of `role` (a backfill worker at its lower priority) and waits until it is ready. */
  launch(role: WorkerSlot["role"]): Promise<Worker>;
  isClosing(): boolean;
}

/**
 * The workers' lives: a worker is adopted into a slot, its replies settle its jobs, and a worker
 * that dies fails only its in-flight jobs (INFERENCE_FAILED: the runner retries their items alone)
 * and is replaced by a new one of its role. When no backfill worker can be restarted, backfill calls
 * go to the online workers (and the guard); when no worker at all can, waiting jobs fail as
 * MODEL_LOAD_FAILED. `stopAll` lets the jobs inside workers finish before it stops them.
 */
export class WorkerLifecycle {
  /** Backfill workers wanted; 0 = backfill calls share the online workers. */
  private backfillWorkers: number;

  constructor(
    private readonly ctx: WorkerLifecycleContext,
    backfillWorkers: number,
  ) {
    this.backfillWorkers = backfillWorkers;
  }

  /** Backfill calls run on the online workers (none wanted, or none could be restarted). */
  get backfillShared(): boolean {
    return this.backfillWorkers === 0;
  }

  adopt(worker: Worker, role: WorkerSlot["role"]): void {
    const slot: WorkerSlot = {
      worker,
      role,
      inFlight: new Map(),
      drained: null,
      backfillInFlight: 0,
      backfillReadyAt: 0,
    };
    this.ctx.slots.push(slot);
    worker.on("message", (reply: WorkerReply) => {
      const job = slot.inFlight.get(reply.id);
      if (job === undefined) return;
      slot.inFlight.delete(reply.id);
      this.ctx.dispatcher.answered(slot, job, reply);
      job.settle(reply);
      if (slot.inFlight.size === 0) slot.drained?.();
      this.ctx.dispatcher.dispatch();
    });
    worker.on("error", () => {
      // 'exit' follows; handled there.
    });
    worker.on("exit", (code) => {
      const index = this.ctx.slots.indexOf(slot);
      if (index >= 0) this.ctx.slots.splice(index, 1);
      // A crash fails the worker's jobs as INFERENCE_FAILED (the runner retries their items alone); a
      // close does not.
      for (const job of slot.inFlight.values()) {
        job.reject(
          this.ctx.isClosing()
            ? new SluiceError("INTERNAL", "model runner closed while the job ran")
            : new SluiceError("INFERENCE_FAILED", `inference worker exited (code ${code})`),
        );
      }
      slot.inFlight.clear();
      slot.backfillInFlight = 0;
      if (!this.ctx.isClosing()) void this.replace(role);
    });
    this.ctx.dispatcher.dispatch();
  }

  /**
   * Lets jobs already inside a worker finish (one ORT call each, bounded), then stops every worker:
   * terminating a thread while onnxruntime-node runs aborts the whole process ("terminate called
   * after throwing an instance of 'Napi::Error'", seen in the worker-pool tests). Idle threads stop
   * safely.
   */
  async stopAll(): Promise<void> {
    const { slots } = this.ctx;
    await Promise.all(
      slots
        .filter((s) => s.inFlight.size > 0)
        .map(
          (s) =>
            new Promise<void>((done) => {
              s.drained = done;
              s.worker.once("exit", () => done());
            }),
        ),
    );
    await Promise.all(slots.map((s) => s.worker.terminate()));
    slots.length = 0;
  }

  private async replace(role: WorkerSlot["role"]): Promise<void> {
    try {
      const worker = await this.ctx.launch(role);
      if (this.ctx.isClosing()) {
        await worker.terminate();
        return;
      }
      this.adopt(worker, role);
    } catch (error) {
      const { slots, queues } = this.ctx;
      // No backfill worker left: backfill calls fall back to the online workers (and the guard).
      if (role === "backfill" && !slots.some((s) => s.role === "backfill")) {
        this.backfillWorkers = 0;
        this.ctx.dispatcher.dispatch();
      }
      if (slots.length === 0) {
        for (const job of queues.drain()) {
          job.reject(
            new SluiceError("MODEL_LOAD_FAILED", `no inference worker could be restarted: ${error}`),
          );
        }
      }
    }
  }
}
