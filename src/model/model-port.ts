import type { ModelBackfillLimits } from "../contracts/backfill-limits.js";
import type { InferenceOutput, InferenceRequest, ModelIdentity } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";
import type { ThreadCpuSource } from "./thread-cpu-clock.js";

/**
 * What the streaming processor and batch mode need from a model. `TextModelRunner` (worker pool over
 * onnxruntime-node) implements it; tests may pass a tiny generated model through the same class.
 */
export type ModelTask = "embedding" | "classification" | "tensor";

/**
 * Why a tensor request does not fit the model's signature (src/model/tensor-signature.ts): checked
 * before any ORT call, each a dead letter at stage validate with the input and shapes in its headers.
 */
export type TensorValidationCode =
  | "TENSOR_INPUT_MISSING"
  | "TENSOR_INPUT_UNKNOWN"
  | "TENSOR_DATATYPE_MISMATCH"
  | "TENSOR_SHAPE_MISMATCH"
  | "TENSOR_NON_FINITE"
  | "TENSOR_TOO_MANY_ROWS"
  | "TENSOR_OUTPUT_UNKNOWN"
  | "TENSOR_REQUEST_REQUIRED";

export type ItemOutcome =
  | { ok: true; output: InferenceOutput; tokens: number; truncated: boolean }
  | {
      ok: false;
      code: "EMPTY_TEXT" | "INVALID_TEXT" | "TOKENIZE_FAILED" | "INFERENCE_FAILED";
      message: string;
    }
  | TensorValidationFailure;

/** A tensor request that does not fit the model: a dead letter at stage validate. */
export interface TensorValidationFailure {
  ok: false;
  code: TensorValidationCode;
  message: string;
  stage: "validate";
  /** Dead-letter context headers without the `sluice.error.` prefix, e.g. `expected-shape`. */
  context: Record<string, string>;
}

/** A model's inference worker threads by lane (docs/lanes.md, "Backfill workers"). */
export interface ModelWorkers {
  online: number;
  /** Workers that run only backfill calls; 0 = backfill calls share the online workers. */
  backfill: number;
  /** The backfill workers' nice value as the kernel reports it (Linux); absent without backfill workers. */
  backfillNice?: number;
  /** The backfill workers run under SCHED_IDLE (Linux, `model.backfillScheduling: idle`); absent without backfill workers. */
  backfillSchedIdle?: boolean;
}

export interface ModelCallStats {
  /** Wall time of the whole batch inside the runner (tokenize + pad + ORT run + postprocess). */
  inferenceMs: number;
  realTokens: number;
  paddedTokens: number;
  /**
   * CPU the batch's ORT calls used on the inference worker threads (and their ORT pool threads),
   * ms; absent for models that run no worker (the no-op model). How it is measured:
   * src/model/thread-cpu-clock.ts.
   */
  cpuMs?: number;
}

export interface ModelRunOptions {
  /**
   * `backfill`: this batch's ORT calls run only while no online call waits, and are cut into slices
   * of at most `model.backfillSliceMs` of measured time and `model.backfillSliceRows` rows
   * (docs/lanes.md). Default `online`.
   */
  lane?: Lane;
}

export interface ModelPort {
  readonly identity: ModelIdentity;
  readonly task: ModelTask;
  /**
   * Full SHA-256 (hex) of the tokenizer file, for batch-mode manifests; `identity.version` already
   * covers model + tokenizer together. Absent for models without a tokenizer (the no-op model).
   */
  readonly tokenizerHash?: string;
  /** How `ModelCallStats.cpuMs` is measured (src/model/thread-cpu-clock.ts); absent when it is not. */
  readonly cpuSource?: ThreadCpuSource;
  /** The inference worker threads; absent for models that run none (the no-op model). */
  readonly workers?: ModelWorkers;
  /** Token count after truncation, used by token-bounded batching. Cheap; runs on the caller's thread. */
  countTokens(text: string): number;
  /** Runs one batch; outcomes come back in input order, one per item. Never rejects for one bad item. */
  run(
    texts: readonly unknown[],
    options?: ModelRunOptions,
  ): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }>;
  /**
   * The SLO guard's levers on the model's backfill calls (docs/lanes.md, "The levers"): the workers'
   * duty cycle and depth, the slice budget and the CPU budget of backfill calls, as the guard's table
   * and the throttle made them (no clamping here).
   * Models without lanes leave it out.
   */
  limitBackfill?(limits: ModelBackfillLimits): void;
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

/** What a model of `task` runs for a request: its tensors for a tensor model, else its text. */
export function modelInputOf(
  task: ModelTask,
  request: { text: unknown; tensors?: InferenceRequest["tensors"] },
): unknown {
  return task === "tensor" ? request.tensors : request.text;
}
