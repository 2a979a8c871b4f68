/**
 * Request and result contracts (DESIGN.md §4). `schemas/*.avsc` are the source of truth;
 * these types mirror them field for field.
 */
export interface InferenceRequest {
  /** Required; producers should also use it as the Kafka key so duplicates land on one partition. */
  id: string;
  text: string;
  /** Optional absolute deadline, epoch milliseconds. */
  deadlineMs?: number | null;
  /** Passed through untouched to the result. */
  attributes?: Record<string, string> | null;
}

export type ResultStatus = "ok" | "expired" | "rejected" | "error";

export type InferenceOutput =
  | { embedding: number[]; label?: undefined; scores?: undefined }
  | { label: string; scores: Record<string, number>; embedding?: undefined };

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
}
