import type { ModelSettings } from "../config/model-settings.js";
import type { ModelBackfillLimits } from "../contracts/backfill-limits.js";
import type { Lane } from "../contracts/lane.js";
import { SluiceError } from "../sluice-error.js";
import type { ModelWorkers } from "./model-port.js";
import { Dispatcher, type WorkerSlot } from "./pool/dispatcher.js";
import { LaneQueues } from "./pool/lane-queues.js";
import {
  type FeedsJob,
  type FeedsJobResult,
  feedsJob,
  type InferenceJob,
  type InferenceJobResult,
  type PoolJob,
  type Settle,
  textJob,
} from "./pool/pool-job.js";
import { launchWorker, type WorkerReady, workerInitOf } from "./pool/worker-launcher.js";
import { WorkerLifecycle } from "./pool/worker-lifecycle.js";
import { resolveBackfillWorkerCount, resolveWorkerCount } from "./worker-count.js";
import type { TensorInfo, WorkerInit } from "./worker-protocol.js";

export type { FeedsJob, FeedsJobResult, InferenceJob, InferenceJobResult } from "./pool/pool-job.js";

/**
 * Workers that run only backfill calls, at a lower CPU priority (docs/lanes.md, "Backfill workers").
 * With none, backfill calls share the online workers.
 */
export interface BackfillWorkerPlan {
  workers: number;
  /** Nice steps below the process. */
  nice: number;
  /** Linux's SCHED_IDLE policy for their threads (`model.backfillScheduling: idle`). */
  schedIdle?: boolean;
}

/**
 * A fixed set of worker threads, one ORT session each, fed from one FIFO queue per lane: the model
 * runners' one door to them. Its rooms (src/model/pool/): `worker-launcher.ts` starts a worker (under
 * tsx in tests), `lane-queues.ts` holds the waiting jobs, `dispatcher.ts` hands them out within the
 * SLO guard's duty cycle, `worker-lifecycle.ts` replaces a worker that dies (it fails only its
 * in-flight jobs; the runner retries items alone), and `pool-job.ts` settles each job from its typed
 * reply.
 */
export class InferenceWorkerPool {
  readonly inputs: TensorInfo[];
  readonly outputs: TensorInfo[];
  /** How the workers measure each call's CPU (thread-cpu-clock.ts). */
  readonly cpuSource: WorkerReady["cpuSource"];
  /** Nice value of the backfill workers' threads as the kernel reports it; undefined without backfill workers. */
  backfillNice: number | undefined;
  /** Whether the backfill workers' threads run under SCHED_IDLE (the kernel's answer); undefined without them. */
  backfillSchedIdle: boolean | undefined;
  private readonly slots: WorkerSlot[] = [];
  private readonly queues = new LaneQueues<PoolJob>();
  private readonly dispatcher: Dispatcher;
  private readonly lifecycle: WorkerLifecycle;
  private closing: Promise<void> | null = null;

  private constructor(
    private readonly init: WorkerInit,
    hello: WorkerReady,
    private readonly backfillPlan: BackfillWorkerPlan,
  ) {
    this.inputs = hello.inputs;
    this.outputs = hello.outputs;
    this.cpuSource = hello.cpuSource;
    const isClosing = () => this.closing !== null;
    this.dispatcher = new Dispatcher({
      slots: this.slots,
      queues: this.queues,
      backfillShared: () => this.lifecycle.backfillShared,
      isClosing,
    });
    this.lifecycle = new WorkerLifecycle(
      {
        slots: this.slots,
        queues: this.queues,
        dispatcher: this.dispatcher,
        launch: async (role) => (await launchWorker(this.initFor(role))).worker,
        isClosing,
      },
      backfillPlan.workers,
    );
  }

  /**
   * The pool a model's settings ask for: `model.workers`, `model.backfillWorkers`, `model.backfillNice`;
   * `modelBytes` = a graph rewritten at load, loaded instead of the file (zipmap-unwrap.ts).
   */
  static startFor(o: ModelSettings, modelBytes?: Uint8Array): Promise<InferenceWorkerPool> {
    const workers = resolveWorkerCount(o.workers);
    const init = workerInitOf(o);
    return InferenceWorkerPool.start(modelBytes ? { ...init, modelBytes } : init, workers, {
      workers: resolveBackfillWorkerCount(o.backfillWorkers, workers, o.backfillLane),
      nice: o.backfillNice,
      schedIdle: o.backfillScheduling === "idle",
    });
  }

  static async start(
    init: WorkerInit,
    workers: number,
    backfill: BackfillWorkerPlan = { workers: 0, nice: 0 },
  ): Promise<InferenceWorkerPool> {
    const first = await launchWorker(init);
    const pool = new InferenceWorkerPool(init, first.hello, backfill);
    pool.lifecycle.adopt(first.worker, "online");
    try {
      const rest = await Promise.all(Array.from({ length: workers - 1 }, () => launchWorker(init)));
      for (const r of rest) pool.lifecycle.adopt(r.worker, "online");
      const backfillWorkers = await Promise.all(
        Array.from({ length: backfill.workers }, () =>
          launchWorker(pool.initFor("backfill")).catch((error: unknown) => {
            throw new SluiceError(
              "MODEL_LOAD_FAILED",
              `could not start the ${backfill.workers} backfill worker(s) (model.backfillWorkers): ${error instanceof Error ? error.message : String(error)}; set model.backfillWorkers: 0 to run backfill calls on the online workers`,
              { cause: error },
            );
          }),
        ),
      );
      for (const r of backfillWorkers) {
        pool.backfillNice = r.hello.nice;
        pool.backfillSchedIdle = r.hello.schedIdle;
        pool.lifecycle.adopt(r.worker, "backfill");
      }
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** Workers by role. */
  get size(): ModelWorkers {
    const backfill = this.slots.filter((s) => s.role === "backfill").length;
    return {
      online: this.slots.length - backfill,
      backfill,
      ...(backfill > 0 && this.backfillNice !== undefined ? { backfillNice: this.backfillNice } : {}),
      ...(backfill > 0 && this.backfillSchedIdle !== undefined
        ? { backfillSchedIdle: this.backfillSchedIdle }
        : {}),
    };
  }

  /** Queues one ORT call; `lane` backfill runs only while no online call waits. */
  run(job: InferenceJob, lane: Lane = "online"): Promise<InferenceJobResult> {
    return this.enqueue<InferenceJobResult>(lane, (settle) => textJob(job, lane, settle));
  }

  /** Queues one ORT call of a tensor model (named feeds in, named outputs back). */
  runFeeds(job: FeedsJob, lane: Lane = "online"): Promise<FeedsJobResult> {
    return this.enqueue<FeedsJobResult>(lane, (settle) => feedsJob(job, lane, settle));
  }

  /**
   * The SLO guard's levers on backfill calls (docs/lanes.md, "The levers"), as its table made them;
   * online calls are never limited.
   */
  limitBackfill(limits: Pick<ModelBackfillLimits, "workerShare" | "workerDepth" | "cpuCores">): void {
    this.dispatcher.limitBackfill(limits);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.dispatcher.stop();
      for (const job of this.queues.drain())
        job.reject(new SluiceError("INTERNAL", "model runner closed before the job ran"));
      await this.lifecycle.stopAll();
    })();
    return this.closing;
  }

  /**
   * A backfill worker runs at the plan's lower priority, and its ORT pool never spin-waits: a
   * spinning backfill thread burns CPU between calls, which the CPU budget sees only when the next
   * call answers.
   */
  private initFor(role: WorkerSlot["role"]): WorkerInit {
    return role === "backfill"
      ? {
          ...this.init,
          nice: this.backfillPlan.nice,
          schedIdle: this.backfillPlan.schedIdle === true,
          allowSpinning: false,
        }
      : this.init;
  }

  private enqueue<R>(lane: Lane, job: (settle: Settle<R>) => PoolJob): Promise<R> {
    if (this.closing !== null) {
      return Promise.reject(new SluiceError("INTERNAL", "model runner is closed; create a new one"));
    }
    return new Promise<R>((resolve, reject) => {
      this.queues.push(job({ resolve, reject }), lane);
      this.dispatcher.dispatch();
    });
  }
}
