import type { ModelTask } from "./model-port.js";
import type { Pooling } from "./tasks/embedding-task.js";
import type { ThreadCpuSource } from "./thread-cpu-clock.js";

/** Messages between `InferenceWorkerPool` (main thread) and `inference-worker` (worker thread). */
export interface WorkerInit {
  modelPath: string;
  intraOpThreads: number;
  interOpThreads: number;
  allowSpinning: boolean;
  task: ModelTask;
  pooling: Pooling;
  normalize: boolean;
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
  | { type: "failed"; id: number; message: string };

export interface TensorInfo {
  name: string;
  type: string;
  shape: (number | string)[];
}

export type WorkerHello =
  | {
      type: "ready";
      inputs: TensorInfo[];
      outputs: TensorInfo[];
      /** How `cpuMs` is measured on this worker. */
      cpuSource: ThreadCpuSource;
    }
  | { type: "init-failed"; message: string };
