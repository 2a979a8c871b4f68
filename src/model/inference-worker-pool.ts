import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { ModelSettings } from "../config/model-settings.js";
import type { BackfillLimits } from "../contracts/backfill-limits.js";
import type { Lane } from "../contracts/lane.js";
import { SluiceError } from "../sluice-error.js";
import type { ModelWorkers } from "./model-port.js";
import { resolveBackfillWorkerCount, resolveWorkerCount } from "./worker-count.js";
import {
  type TensorInfo,
  transferablesOf,
  type WorkerFeed,
  type WorkerFeedsRequest,
  type WorkerHello,
  type WorkerInit,
  type WorkerReply,
  type WorkerRunRequest,
} from "./worker-protocol.js";

/** The worker settings of a model's `ModelSettings` (text and tensor runners load workers alike). */
export function workerInitOf(o: ModelSettings): WorkerInit {
  return {
    modelPath: o.modelPath,
    intraOpThreads: o.intraOpThreads,
    interOpThreads: o.interOpThreads,
    allowSpinning: o.allowSpinning,
    task: o.task,
    pooling: o.pooling,
    normalize: o.normalize,
    nice: 0,
  };
}

/**
 * Workers that run only backfill calls, at a lower CPU priority (docs/lanes.md, "Backfill workers").
 * With none, backfill calls share the online workers.
 */
export interface BackfillWorkerPlan {
  workers: number;
  /** Nice steps below the process. */
  nice: number;
}

type WorkerHelloReady = Extract<WorkerHello, { type: "ready" }>;

/** One ORT call's inputs: the wire request without its correlation id (added by the pool). */
export type InferenceJob = Omit<WorkerRunRequest, "id">;

export interface InferenceJobResult {
  /** [rows, dim] row-major: pooled embeddings or class probabilities. */
  data: Float32Array;
  dim: number;
  runMs: number;
  /** CPU of the call on the worker's threads, ms (`cpuSource` says how it is measured). */
  cpuMs: number;
}

/** A tensor model's ORT call: named feeds, and the outputs to fetch. */
export type FeedsJob = Omit<WorkerFeedsRequest, "id">;

export interface FeedsJobResult {
  outputs: WorkerFeed[];
  runMs: number;
  /** As for `InferenceJobResult`. */
  cpuMs: number;
}

type Pending =
  | { job: InferenceJob; lane: Lane; resolve: (r: InferenceJobResult) => void; reject: (e: Error) => void }
  | { job: FeedsJob; lane: Lane; resolve: (r: FeedsJobResult) => void; reject: (e: Error) => void };

interface Slot {
  worker: Worker;
  /** `online`: takes online calls (and backfill calls when the pool has no backfill workers); `backfill`: backfill calls only. */
  role: "online" | "backfill";
  /** Jobs posted to the worker and not answered yet, by job id, in posting order (the worker runs them in turn). */
  inFlight: Map<number, Pending>;
  /** Resolves the close() wait once `inFlight` is empty. */
  drained: (() => void) | null;
  /** Backfill jobs posted and not answered. */
  backfillInFlight: number;
  /** performance.now() before which this worker takes no backfill job (the guard's duty cycle). */
  backfillReadyAt: number;
}

/**
 * Jobs a worker holds at once: the one it runs and the next one, so it starts the next ORT call
 * without waiting for the main thread to answer its reply (a busy main thread otherwise leaves the
 * worker idle between isolated items). An online call that arrives then waits for at most two
 * calls per worker (docs/lanes.md, "Slices").
 */
export const JOBS_PER_WORKER = 2;

// The worker sits next to this module: `.ts` under vitest/tsx, `.js` in dist/.
/**
 * Waiting jobs, one FIFO per lane (head index, no `Array.shift`, docs/design.md §6.10). A free worker
 * takes the oldest online job, and a backfill job only when no online job waits, so an online call
 * waits at most for the calls a worker already holds (JOBS_PER_WORKER; docs/lanes.md, "Slices").
 */
class LaneJobQueue {
  private readonly lanes: Record<Lane, { items: Pending[]; head: number }> = {
    online: { items: [], head: 0 },
    backfill: { items: [], head: 0 },
  };

  push(p: Pending, lane: Lane): void {
    this.lanes[lane].items.push(p);
  }

  has(lane: Lane): boolean {
    const q = this.lanes[lane];
    return q.head < q.items.length;
  }

  /** The oldest waiting job of `lane`. */
  take(lane: Lane): Pending | undefined {
    const q = this.lanes[lane];
    if (q.head >= q.items.length) return undefined;
    const p = q.items[q.head++] as Pending;
    if (q.head === q.items.length) {
      q.items.length = 0;
      q.head = 0;
    } else if (q.head > 64 && q.head * 2 > q.items.length) {
      q.items.splice(0, q.head);
      q.head = 0;
    }
    return p;
  }

  /** Removes and returns every waiting job. */
  drain(): Pending[] {
    const out: Pending[] = [];
    for (const q of Object.values(this.lanes)) {
      out.push(...q.items.slice(q.head));
      q.items.length = 0;
      q.head = 0;
    }
    return out;
  }
}

const selfPath = fileURLToPath(import.meta.url);
const workerPath = selfPath.replace(/inference-worker-pool\.(ts|js)$/, "inference-worker.$1");

/**
 * Under vitest/tsx the worker is TypeScript. `execArgv: ["--import", "tsx"]` does not reach a worker's
 * own entry module on Node 20, so a TypeScript worker starts from a small eval'd bootstrap that registers
 * tsx's ESM hooks in the worker and then imports the real entry. dist/ workers start directly.
 */
function startWorker(data: WorkerInit): Worker {
  if (!workerPath.endsWith(".ts")) return new Worker(workerPath, { workerData: data });
  const bootstrap = `import(${JSON.stringify(tsxEsmApiUrl())}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(workerPath).href)}); })`;
  return new Worker(bootstrap, { eval: true, workerData: data });
}

/**
 * URL of tsx's ESM API. Neither `import.meta.resolve` (missing under vitest's module runner) nor
 * `require.resolve` (yields the CommonJS build, which cannot register ESM hooks) fits, so read the
 * package's own export map.
 */
function tsxEsmApiUrl(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve("tsx/package.json");
  const manifest = require(manifestPath) as { exports: Record<string, { import?: { default?: string } }> };
  const relative = manifest.exports["./esm/api"]?.import?.default;
  if (relative === undefined) throw new Error("installed tsx has no ./esm/api export");
  return pathToFileURL(join(dirname(manifestPath), relative)).href;
}

/**
 * A fixed set of worker threads, one ORT session each, fed from one FIFO queue per lane. A worker that dies
 * fails only its in-flight job (the runner retries items alone) and is replaced.
 */
export class InferenceWorkerPool {
  readonly inputs: TensorInfo[];
  readonly outputs: TensorInfo[];
  /** How the workers measure each call's CPU (thread-cpu-clock.ts). */
  readonly cpuSource: WorkerHelloReady["cpuSource"];
  private readonly slots: Slot[] = [];
  private readonly queue = new LaneJobQueue();
  private nextJobId = 1;
  private closing: Promise<void> | null = null;
  private backfill: Pick<BackfillLimits, "workerShare" | "workerDepth"> = {
    workerShare: 1,
    workerDepth: JOBS_PER_WORKER,
  };
  /** Backfill workers wanted; 0 = backfill calls share the online workers. */
  private backfillWorkers: number;
  /** A dispatch scheduled for when a worker's backfill gap ends. */
  private gapTimer: ReturnType<typeof setTimeout> | undefined;

  /** Nice value of the backfill workers' threads as the kernel reports it; undefined without backfill workers. */
  backfillNice: number | undefined;

  private constructor(
    private readonly init: WorkerInit,
    hello: Extract<WorkerHello, { type: "ready" }>,
    private readonly backfillPlan: BackfillWorkerPlan,
  ) {
    this.inputs = hello.inputs;
    this.outputs = hello.outputs;
    this.cpuSource = hello.cpuSource;
    this.backfillWorkers = backfillPlan.workers;
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
    });
  }

  static async start(
    init: WorkerInit,
    workers: number,
    backfill: BackfillWorkerPlan = { workers: 0, nice: 0 },
  ): Promise<InferenceWorkerPool> {
    const first = await spawn(init);
    const pool = new InferenceWorkerPool(init, first.hello, backfill);
    pool.adopt(first.worker, "online");
    try {
      const rest = await Promise.all(Array.from({ length: workers - 1 }, () => spawn(init)));
      for (const r of rest) pool.adopt(r.worker, "online");
      const backfillInit = pool.backfillInit();
      const backfillWorkers = await Promise.all(
        Array.from({ length: backfill.workers }, () =>
          spawn(backfillInit).catch((error: unknown) => {
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
        pool.adopt(r.worker, "backfill");
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
    };
  }

  private backfillInit(): WorkerInit {
    return { ...this.init, nice: this.backfillPlan.nice };
  }

  /** Queues one ORT call; `lane` backfill runs only while no online call waits. */
  run(job: InferenceJob, lane: Lane = "online"): Promise<InferenceJobResult> {
    return this.enqueue((resolve, reject) => ({ job, lane, resolve, reject }), lane);
  }

  /** Queues one ORT call of a tensor model (named feeds in, named outputs back). */
  runFeeds(job: FeedsJob, lane: Lane = "online"): Promise<FeedsJobResult> {
    return this.enqueue((resolve, reject) => ({ job, lane, resolve, reject }), lane);
  }

  private enqueue<R>(
    pending: (resolve: (r: R) => void, reject: (e: Error) => void) => Pending,
    lane: Lane,
  ): Promise<R> {
    if (this.closing !== null) {
      return Promise.reject(new SluiceError("INTERNAL", "model runner is closed; create a new one"));
    }
    return new Promise<R>((resolve, reject) => {
      this.queue.push(pending(resolve, reject), lane);
      this.dispatch();
    });
  }

  /**
   * The SLO guard's levers on backfill calls (docs/lanes.md, "The levers"), as its table made them;
   * online calls are never limited.
   */
  limitBackfill(limits: Pick<BackfillLimits, "workerShare" | "workerDepth">): void {
    this.backfill = { workerShare: limits.workerShare, workerDepth: limits.workerDepth };
    this.dispatch();
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.gapTimer !== undefined) clearTimeout(this.gapTimer);
      const pending = this.queue.drain();
      for (const p of pending)
        p.reject(new SluiceError("INTERNAL", "model runner closed before the job ran"));
      // Let jobs already inside a worker finish (one ORT call each, bounded): terminating a thread
      // while onnxruntime-node runs aborts the whole process ("terminate called after throwing an
      // instance of 'Napi::Error'", seen in the worker-pool tests). Idle threads stop safely.
      await Promise.all(
        this.slots
          .filter((s) => s.inFlight.size > 0)
          .map(
            (s) =>
              new Promise<void>((done) => {
                s.drained = done;
                s.worker.once("exit", () => done());
              }),
          ),
      );
      await Promise.all(this.slots.map((s) => s.worker.terminate()));
      this.slots.length = 0;
    })();
    return this.closing;
  }

  private adopt(worker: Worker, role: Slot["role"]): void {
    const slot: Slot = {
      worker,
      role,
      inFlight: new Map(),
      drained: null,
      backfillInFlight: 0,
      backfillReadyAt: 0,
    };
    this.slots.push(slot);
    worker.on("message", (reply: WorkerReply) => {
      const pending = slot.inFlight.get(reply.id);
      if (pending === undefined) return;
      slot.inFlight.delete(reply.id);
      if (pending.lane === "backfill") this.backfillAnswered(slot, reply);
      if (reply.type === "done") {
        (pending.resolve as (r: InferenceJobResult) => void)({
          data: reply.data,
          dim: reply.dim,
          runMs: reply.runMs,
          cpuMs: reply.cpuMs,
        });
      } else if (reply.type === "outputs") {
        (pending.resolve as (r: FeedsJobResult) => void)({
          outputs: reply.outputs,
          runMs: reply.runMs,
          cpuMs: reply.cpuMs,
        });
      } else pending.reject(new SluiceError("INFERENCE_FAILED", reply.message, { retriable: false }));
      if (slot.inFlight.size === 0) slot.drained?.();
      this.dispatch();
    });
    worker.on("error", () => {
      // 'exit' follows; handled there.
    });
    worker.on("exit", (code) => {
      const index = this.slots.indexOf(slot);
      if (index >= 0) this.slots.splice(index, 1);
      // A crash fails the worker's jobs as INFERENCE_FAILED (the runner retries their items alone); a
      // close does not.
      for (const pending of slot.inFlight.values()) {
        pending.reject(
          this.closing !== null
            ? new SluiceError("INTERNAL", "model runner closed while the job ran")
            : new SluiceError("INFERENCE_FAILED", `inference worker exited (code ${code})`),
        );
      }
      slot.inFlight.clear();
      slot.backfillInFlight = 0;
      if (this.closing === null) void this.replace(role);
    });
    this.dispatch();
  }

  private async replace(role: Slot["role"]): Promise<void> {
    try {
      const { worker } = await spawn(role === "backfill" ? this.backfillInit() : this.init);
      if (this.closing !== null) {
        await worker.terminate();
        return;
      }
      this.adopt(worker, role);
    } catch (error) {
      // No backfill worker left: backfill calls fall back to the online workers (and the guard).
      if (role === "backfill" && !this.slots.some((s) => s.role === "backfill")) {
        this.backfillWorkers = 0;
        this.dispatch();
      }
      if (this.slots.length === 0) {
        const pending = this.queue.drain();
        for (const p of pending) {
          p.reject(new SluiceError("MODEL_LOAD_FAILED", `no inference worker could be restarted: ${error}`));
        }
      }
    }
  }

  /**
   * Idle workers get a job first, then each worker its next one (up to JOBS_PER_WORKER). Online
   * jobs go to online workers only. Backfill jobs go to the backfill workers, or, when the pool has
   * none, to online workers with no online job waiting; either way only within the guard's limits:
   * depth, and the worker's gap after its last backfill call (its duty cycle).
   */
  private dispatch(): void {
    const now = performance.now();
    let nextGapEnd = Number.POSITIVE_INFINITY;
    for (let depth = 1; depth <= JOBS_PER_WORKER; depth++) {
      for (const slot of this.slots) {
        if (slot.inFlight.size >= depth) continue;
        let pending = slot.role === "online" ? this.queue.take("online") : undefined;
        if (
          pending === undefined &&
          (slot.role === "backfill" || this.backfillWorkers === 0) &&
          this.queue.has("backfill") &&
          slot.backfillInFlight < this.backfill.workerDepth
        ) {
          if (now >= slot.backfillReadyAt) pending = this.queue.take("backfill");
          else nextGapEnd = Math.min(nextGapEnd, slot.backfillReadyAt);
        }
        if (pending === undefined) continue;
        this.post(slot, pending);
      }
    }
    if (nextGapEnd !== Number.POSITIVE_INFINITY && this.gapTimer === undefined && this.closing === null) {
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

  private post(slot: Slot, pending: Pending): void {
    const id = this.nextJobId++;
    slot.inFlight.set(id, pending);
    if (pending.lane === "backfill") slot.backfillInFlight++;
    const { job } = pending;
    if ("feeds" in job) {
      const request: WorkerFeedsRequest = { id, ...job };
      slot.worker.postMessage(request, transferablesOf(job.feeds));
      return;
    }
    const request: WorkerRunRequest = { id, ...job };
    slot.worker.postMessage(request, [
      job.inputIds.buffer as ArrayBuffer,
      job.attentionMask.buffer as ArrayBuffer,
    ]);
  }

  /** A backfill call ended: under a share below 1 the worker waits before its next backfill call. */
  private backfillAnswered(slot: Slot, reply: WorkerReply): void {
    slot.backfillInFlight = Math.max(0, slot.backfillInFlight - 1);
    const share = this.backfill.workerShare;
    if (share >= 1 || reply.type === "failed") return;
    const gapMs = share <= 0 ? 0 : (reply.runMs * (1 - share)) / share;
    slot.backfillReadyAt = performance.now() + gapMs;
  }
}

function spawn(
  init: WorkerInit,
): Promise<{ worker: Worker; hello: Extract<WorkerHello, { type: "ready" }> }> {
  return new Promise((resolve, reject) => {
    const worker = startWorker(init);
    const fail = (message: string) => {
      void worker.terminate();
      reject(new SluiceError("MODEL_LOAD_FAILED", `could not load model ${init.modelPath}: ${message}`));
    };
    worker.once("message", (hello: WorkerHello) => {
      worker.off("error", onError);
      worker.off("exit", onExit);
      if (hello.type === "ready") resolve({ worker, hello });
      else fail(hello.message);
    });
    const onError = (error: Error) => fail(error.message);
    const onExit = (code: number) => fail(`worker exited with code ${code} while loading`);
    worker.once("error", onError);
    worker.once("exit", onExit);
  });
}
