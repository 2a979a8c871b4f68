import type { FallbackReason } from "../contracts/inference.js";
import { SluiceError } from "../sluice-error.js";
import type { FallbackRules } from "./fallback-rules.js";

/**
 * When an online request is answered by the fallback rules instead of the model (docs/lanes.md,
 * "Fallback"). Pure: the processor passes the queue facts and the clock.
 *
 * - `deadline`: at intake, or when its batch is about to run, the request is predicted to finish
 *   after its deadline: `now + (items ahead + 1) × measured ms per item` at intake, and
 *   `now + batch size × measured ms per item` at dispatch (both include requests that have already
 *   expired); checked first;
 * - `overload`: at intake, the online lane already holds `maxOnlineQueue` requests (queued or in
 *   running batches);
 * - `model_error`: the model failed for it (INFERENCE_FAILED, TOKENIZE_FAILED).
 * Backfill requests never fall back: their results must come from the model.
 */
export interface FallbackPolicyOptions {
  rules: FallbackRules;
  /** Online requests held (queued or in running batches) at which new ones fall back (`overload`). */
  maxOnlineQueue: number;
}

export interface IntakeFacts {
  /** Online requests held now (queued, or in batches not yet finished). */
  onlineHeld: number;
  /** Of those, how many run before this request. */
  ahead: number;
  deadlineMs: number;
  nowMs: number;
  /** Measured inference ms per item (0 = not measured yet: no deadline prediction). */
  msPerItem: number;
}

const MODEL_ERRORS = new Set(["INFERENCE_FAILED", "TOKENIZE_FAILED"]);

export class FallbackPolicy {
  constructor(private readonly opts: FallbackPolicyOptions) {}

  get rules(): FallbackRules {
    return this.opts.rules;
  }

  atIntake(f: IntakeFacts): FallbackReason | undefined {
    // A request that is already late, or will be, says `deadline` even when the queue is also full.
    if (f.nowMs >= f.deadlineMs) return "deadline";
    if (f.msPerItem > 0 && f.nowMs + (f.ahead + 1) * f.msPerItem > f.deadlineMs) return "deadline";
    if (f.onlineHeld >= this.opts.maxOnlineQueue) return "overload";
    return undefined;
  }

  atDispatch(
    deadlineMs: number,
    nowMs: number,
    batchSize: number,
    msPerItem: number,
  ): FallbackReason | undefined {
    return nowMs + batchSize * msPerItem >= deadlineMs ? "deadline" : undefined;
  }

  /** `model_error` for a model failure code, undefined for everything else. */
  afterModel(code: string): FallbackReason | undefined {
    return MODEL_ERRORS.has(code) ? "model_error" : undefined;
  }
}

/**
 * The policy for a processor: none without a rules file (behaviour as without fallback); otherwise
 * the file's rules, which answer classification models only.
 */
export function fallbackPolicyFor(
  o: { rulesPath: string | undefined; maxOnlineQueue: number; modelTask: string },
  load: (path: string) => FallbackRules,
): FallbackPolicy | undefined {
  if (o.rulesPath === undefined) return undefined;
  if (o.modelTask !== "classification") {
    throw new SluiceError(
      "CONFIG_INVALID",
      `fallback.rulesPath is set (${o.rulesPath}) but the model's task is ${o.modelTask}: fallback rules answer with a label and scores, so they need model.task classification; unset fallback.rulesPath`,
    );
  }
  return new FallbackPolicy({ rules: load(o.rulesPath), maxOnlineQueue: o.maxOnlineQueue });
}
