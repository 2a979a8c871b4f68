import type { TensorInputs, TensorOutput } from "./tensor.js";

/**
 * Request and result contracts (docs/design.md §4). `schemas/*.avsc` are the source of truth;
 * these types mirror them field for field. Tensor requests and outputs (V2 JSON only) are in tensor.ts.
 */
export interface InferenceRequest {
  /** Required; producers should also use it as the Kafka key so duplicates land on one partition. */
  id: string;
  text: string;
  /** Optional absolute deadline, epoch milliseconds. */
  deadlineMs?: number | null;
  /** Passed through untouched to the result. */
  attributes?: Record<string, string> | null;
  /** The tensors of a V2 request (topics.requestCodec v2-json); absent for text requests. */
  tensors?: TensorInputs | null;
}

export type ResultStatus = "ok" | "expired" | "rejected" | "error" | "fallback";

/**
 * Why a request was answered by the fallback rules instead of the model (docs/lanes.md): predicted to
 * miss its deadline, the model failed for it, or the online queue was over its bound.
 */
export type FallbackReason = "deadline" | "model_error" | "overload";

export const FALLBACK_REASONS: readonly FallbackReason[] = ["deadline", "model_error", "overload"];

export type InferenceOutput =
  | { embedding: number[]; label?: undefined; scores?: undefined }
  | { label: string; scores: Record<string, number>; embedding?: undefined }
  | (TensorOutput & { embedding?: undefined; label?: undefined; scores?: undefined });

export interface ModelIdentity {
  name: string;
  /** First 12 hex digits of SHA-256 over the model file and the tokenizer file. */
  version: string;
}

export interface InferenceResult {
  id: string;
  status: ResultStatus;
  output: InferenceOutput | null;
  model: ModelIdentity;
  source: { topic: string; partition: number; offset: string };
  timing: {
    requestTimestamp: number;
    queueMs: number;
    inferenceMs: number;
    batchSize: number;
    completedAt: number;
  };
  attributes: Record<string, string> | null;
  /** True when the text was cut to `maxSequenceTokens`. */
  truncated?: boolean;
  error?: { code: string; message: string } | null;
  /** Set when status is `fallback`: why the rules answered instead of the model. */
  fallbackReason?: FallbackReason | null;
  /** The backfill run of the request (its `sluice.run-id` header); absent for online requests. */
  runId?: string | null;
}
