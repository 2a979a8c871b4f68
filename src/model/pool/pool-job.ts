import type { Lane } from "../../contracts/lane.js";
import { SluiceError } from "../../sluice-error.js";
import {
  transferablesOf,
  type WorkerFeed,
  type WorkerFeedsRequest,
  type WorkerReply,
  type WorkerRunRequest,
} from "../worker-protocol.js";

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

/**
 * A queued ORT call: its lane, its wire request under a correlation id, and how the worker's reply
 * settles it. Each kind of job takes exactly its own reply (worker-protocol.ts): `done` settles a
 * text job, `outputs` a feeds job; `failed` rejects either as INFERENCE_FAILED (the runner retries
 * the items alone), and the other kind's reply rejects it as INTERNAL (a protocol bug).
 */
export interface PoolJob {
  readonly lane: Lane;
  /** The message to post for this job under `id`, and the buffers it transfers (no copy). */
  message(id: number): { request: WorkerRunRequest | WorkerFeedsRequest; transfer: ArrayBuffer[] };
  settle(reply: WorkerReply): void;
  reject(error: Error): void;
}

/** How a job's promise is settled. */
export interface Settle<R> {
  resolve(result: R): void;
  reject(error: Error): void;
}

/** A text model's call: token ids and mask in, `done` ([rows, dim] floats) back. */
export function textJob(
  job: InferenceJob,
  lane: Lane,
  { resolve, reject }: Settle<InferenceJobResult>,
): PoolJob {
  return {
    lane,
    message: (id) => ({
      request: { id, ...job },
      transfer: [job.inputIds.buffer as ArrayBuffer, job.attentionMask.buffer as ArrayBuffer],
    }),
    settle: (reply) =>
      reply.type === "done"
        ? resolve({ data: reply.data, dim: reply.dim, runMs: reply.runMs, cpuMs: reply.cpuMs })
        : reject(replyError(reply, "done")),
    reject,
  };
}

/** A tensor model's call: named feeds in, the named `outputs` back. */
export function feedsJob(job: FeedsJob, lane: Lane, { resolve, reject }: Settle<FeedsJobResult>): PoolJob {
  return {
    lane,
    message: (id) => ({ request: { id, ...job }, transfer: transferablesOf(job.feeds) }),
    settle: (reply) =>
      reply.type === "outputs"
        ? resolve({ outputs: reply.outputs, runMs: reply.runMs, cpuMs: reply.cpuMs })
        : reject(replyError(reply, "outputs")),
    reject,
  };
}

function replyError(reply: WorkerReply, expected: WorkerReply["type"]): SluiceError {
  if (reply.type === "failed")
    return new SluiceError("INFERENCE_FAILED", reply.message, { retriable: false });
  return new SluiceError(
    "INTERNAL",
    `inference worker answered job ${reply.id} with "${reply.type}", expected "${expected}"; this is a bug`,
  );
}
