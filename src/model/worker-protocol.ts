import type { ModelTask } from "./model-port.js";
import type { Pooling } from "./tasks/embedding-task.js";
import type { ThreadCpuSource } from "./thread-cpu-clock.js";

/** Messages between `InferenceWorkerPool` (main thread) and `inference-worker` (worker thread). */
export interface WorkerInit {
  modelPath: string;
  /** The model to load instead of reading `modelPath`: a graph rewritten at load (zipmap-unwrap.ts). */
  modelBytes?: Uint8Array;
  intraOpThreads: number;
  interOpThreads: number;
  allowSpinning: boolean;
  task: ModelTask;
  pooling: Pooling;
  normalize: boolean;
  /** Nice steps the worker lowers its own thread by before its ORT session exists (0 = unchanged; Linux). */
  nice: number;
  /** The worker's thread takes Linux's SCHED_IDLE policy before its ORT session exists (backfill workers). */
  schedIdle?: boolean;
}

export interface FeedNames {
  inputIds: string;
  attentionMask: string;
  /** null when the model has no token-type input. */
  tokenTypeIds: string | null;
}

export interface WorkerRunRequest {
  id: number;
  rows: number;
  seqLen: number;
  /** [rows, seqLen], transferred. */
  inputIds: BigInt64Array;
  /** [rows, seqLen], transferred. */
  attentionMask: BigInt64Array;
  feedNames: FeedNames;
  outputName: string;
}

/** ORT element types of named feeds (tensor models); `bool` travels as one byte per element. */
export type FeedElementType = "float32" | "float64" | "int32" | "int64" | "bool" | "string";

export type FeedData = Float32Array | Float64Array | Int32Array | BigInt64Array | Uint8Array | string[];

/** One named tensor crossing the thread boundary (typed arrays are transferred, strings cloned). */
export interface WorkerFeed {
  name: string;
  type: FeedElementType;
  dims: number[];
  data: FeedData;
}

/**
 * A tensor model's ORT call: named feeds in, the named outputs back as they are (no post-processing).
 * Told apart from the text request by `feeds`.
 */
export interface WorkerFeedsRequest {
  id: number;
  feeds: WorkerFeed[];
  outputNames: string[];
}

export type WorkerReply =
  | {
      type: "done";
      id: number;
      data: Float32Array;
      dim: number;
      runMs: number;
      /** CPU of this call on the worker's threads (itself and its ORT pool), ms; see thread-cpu-clock.ts. */
      cpuMs: number;
    }
  | {
      type: "outputs";
      id: number;
      outputs: WorkerFeed[];
      runMs: number;
      /** As for "done". */
      cpuMs: number;
    }
  | { type: "failed"; id: number; message: string };

export interface TensorInfo {
  name: string;
  /** ORT element type (`float32`, `int64`, `string`, …) or `non-tensor` (sequences and maps, e.g. ZipMap). */
  type: string;
  shape: (number | string)[];
}

/** Buffers a feed list can transfer instead of copying (string tensors are cloned). */
export function transferablesOf(feeds: readonly WorkerFeed[]): ArrayBuffer[] {
  const out: ArrayBuffer[] = [];
  for (const f of feeds) {
    if (!Array.isArray(f.data) && !out.includes(f.data.buffer as ArrayBuffer))
      out.push(f.data.buffer as ArrayBuffer);
  }
  return out;
}

export type WorkerHello =
  | {
      type: "ready";
      inputs: TensorInfo[];
      outputs: TensorInfo[];
      /** How `cpuMs` is measured on this worker. */
      cpuSource: ThreadCpuSource;
      /** The worker thread's nice value once set up (what the kernel reports, not what was asked). */
      nice: number;
      /** The worker thread runs under SCHED_IDLE (what the kernel reports). */
      schedIdle: boolean;
    }
  | { type: "init-failed"; message: string };
