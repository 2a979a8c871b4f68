import type { InferenceOutput, ModelIdentity } from "../contracts/inference.js";

/**
 * What the streaming processor and batch mode need from a model. `ModelRunner` (worker pool over
 * onnxruntime-node) implements it; tests may pass a tiny generated model through the same class.
 */
export type ModelTask = "embedding" | "classification";

export type ItemOutcome =
  | { ok: true; output: InferenceOutput; tokens: number; truncated: boolean }
  | {
      ok: false;
      code: "EMPTY_TEXT" | "INVALID_TEXT" | "TOKENIZE_FAILED" | "INFERENCE_FAILED";
      message: string;
    };

export interface BatchRunStats {
  /** Wall time of the whole batch inside the runner (tokenize + pad + ORT run + postprocess). */
  inferenceMs: number;
  realTokens: number;
  paddedTokens: number;
}

export interface ModelPort {
  readonly identity: ModelIdentity;
  readonly task: ModelTask;
  /**
   * Full SHA-256 (hex) of the tokenizer file, for batch-mode manifests; `identity.version` already
   * covers model + tokenizer together. Absent for models without a tokenizer (the no-op model).
   */
  readonly tokenizerHash?: string;
  /** Token count after truncation, used by token-bounded batching. Cheap; runs on the caller's thread. */
  countTokens(text: string): number;
  /** Runs one batch; outcomes come back in input order, one per item. Never rejects for one bad item. */
  run(texts: readonly unknown[]): Promise<{ outcomes: ItemOutcome[]; stats: BatchRunStats }>;
  close(): Promise<void>;
}
