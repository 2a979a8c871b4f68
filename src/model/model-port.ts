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

/**
 * Runs one batch so that every input gets exactly one outcome, whatever the model does: a whole-batch
 * failure becomes INFERENCE_FAILED for each item, and a short outcome list (a model-runner bug) is
 * padded with INFERENCE_FAILED instead of silently dropping items. The streaming processor and batch
 * mode both call the model through this, so a record is never lost to a model fault.
 */
export async function runBatch(
  model: ModelPort,
  texts: readonly unknown[],
): Promise<{ outcomes: ItemOutcome[]; stats: BatchRunStats }> {
  let outcomes: ItemOutcome[];
  let stats: BatchRunStats = { inferenceMs: 0, realTokens: 0, paddedTokens: 0 };
  try {
    const run = await model.run(texts);
    outcomes = run.outcomes;
    stats = run.stats;
  } catch (error) {
    const message = `model failed for the whole batch: ${error instanceof Error ? error.message : String(error)}`;
    return { outcomes: texts.map(() => ({ ok: false, code: "INFERENCE_FAILED", message })), stats };
  }
  if (outcomes.length === texts.length) return { outcomes, stats };
  const missing: ItemOutcome = {
    ok: false,
    code: "INFERENCE_FAILED",
    message: `model returned ${outcomes.length} outcomes for a batch of ${texts.length}; this is a bug in the model runner`,
  };
  return { outcomes: texts.map((_, i) => outcomes[i] ?? missing), stats };
}
