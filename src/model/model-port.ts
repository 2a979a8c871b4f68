import type { InferenceOutput, ModelIdentity } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";

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

export interface ModelCallStats {
  /** Wall time of the whole batch inside the runner (tokenize + pad + ORT run + postprocess). */
  inferenceMs: number;
  realTokens: number;
  paddedTokens: number;
}

export interface ModelRunOptions {
  /**
   * `backfill`: this batch's ORT calls run only while no online call waits, and are cut into slices
   * of at most `model.backfillSliceMs` of measured time and `model.backfillSliceRows` rows
   * (docs/lanes.md). Default `online`.
   */
  lane?: Lane;
}

/** How much of the model the backfill lane may use now: the SLO guard's levers (docs/lanes.md). */
export interface BackfillModelLimits {
  /** Share of each worker's time for backfill ORT calls (0..1; a duty cycle). */
  workerShare: number;
  /** Backfill ORT calls a worker may hold at once (0 = none). */
  workerDepth: number;
  /** Backfill slices' time budget as a share of `model.backfillSliceMs` (0..1). */
  sliceShare: number;
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
  run(
    texts: readonly unknown[],
    options?: ModelRunOptions,
  ): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }>;
  /** Applies the SLO guard's limits to backfill calls; models without lanes ignore it. */
  limitBackfill?(limits: BackfillModelLimits): void;
  close(): Promise<void>;
}

/**
 * Runs one batch so that every input gets exactly one outcome: a short outcome list (a model-runner
 * bug) is padded with INFERENCE_FAILED instead of silently dropping items. A whole-batch failure is
 * the caller's choice: `"items"` (the streaming processor: every item becomes INFERENCE_FAILED, so
 * the records go to dead letters and nothing stops) or `"throw"` (batch mode: the run stops and
 * resumes from its manifest). Both modes call the model through this one rule.
 */
export async function runBatch(
  model: ModelPort,
  texts: readonly unknown[],
  onWholeBatchFailure: "items" | "throw",
  options?: ModelRunOptions,
): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }> {
  let run: { outcomes: ItemOutcome[]; stats: ModelCallStats };
  try {
    run = await model.run(texts, options);
  } catch (error) {
    if (onWholeBatchFailure === "throw") throw error;
    const message = `model failed for the whole batch: ${error instanceof Error ? error.message : String(error)}`;
    return {
      outcomes: texts.map(() => ({ ok: false, code: "INFERENCE_FAILED", message })),
      stats: { inferenceMs: 0, realTokens: 0, paddedTokens: 0 },
    };
  }
  if (run.outcomes.length === texts.length) return run;
  const missing: ItemOutcome = {
    ok: false,
    code: "INFERENCE_FAILED",
    message: `model returned ${run.outcomes.length} outcomes for a batch of ${texts.length}; this is a bug in the model runner`,
  };
  return { outcomes: texts.map((_, i) => run.outcomes[i] ?? missing), stats: run.stats };
}
