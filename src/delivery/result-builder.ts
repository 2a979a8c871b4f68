import type {
  FallbackReason,
  InferenceOutput,
  InferenceRequest,
  InferenceResult,
  ModelIdentity,
  ResultStatus,
} from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";
import type { ItemOutcome } from "../model/model-port.js";

/**
 * Turns a request plus what happened to it into its one outcome record.
 *
 * | outcome                         | status   | streaming disposition                 |
 * |---------------------------------|----------|---------------------------------------|
 * | ok                              | ok       | result                                |
 * | DEADLINE_EXCEEDED               | expired  | result                                |
 * | EMPTY_TEXT, INVALID_TEXT        | rejected | result (bad input, replay won't help) |
 * | TOKENIZE_FAILED, INFERENCE_FAILED | error  | dead letter (stage model), not result |
 *
 * Per-item model errors go to the dead-letter topic (so they can be replayed after a fix), and then
 * no result is written for that request. `buildResult` can still build a status-error result (batch
 * mode writes those to its error output); `routeOutcome` applies the streaming rule.
 */
export type ResultOutcome =
  | ItemOutcome
  | { ok: false; code: "DEADLINE_EXCEEDED"; message: string }
  /** No loaded model has the version the record needs (docs/model-upgrades.md): a dead letter. */
  | { ok: false; code: "MODEL_VERSION_UNAVAILABLE"; message: string }
  | FallbackOutcome;

/** A request the fallback rules answered instead of the model (status `fallback`, docs/lanes.md). */
export interface FallbackOutcome {
  ok: true;
  output: InferenceOutput;
  tokens: 0;
  truncated: false;
  fallbackReason: FallbackReason;
}

export interface ResultContext {
  request: InferenceRequest;
  source: { topic: string; partition: number; offset: string };
  /** Kafka timestamp of the request record, epoch ms. */
  requestTimestamp: number;
  model: ModelIdentity;
  /** Batch formation − enqueue, ms. */
  queueMs: number;
  /** Batch inference wall time, ms (0 when the request never reached the model). */
  inferenceMs: number;
  batchSize: number;
  /** Epoch ms. */
  completedAt: number;
  /** The request's lane (default online); backfill results go to the backfill results topic. */
  lane?: Lane;
  /** The backfill run of the request (header `sluice.run-id`); set on the result as `runId`. */
  runId?: string;
}

export type OutcomeRoute =
  | { kind: "result"; result: InferenceResult }
  | {
      kind: "dead_letter";
      error: { code: string; message: string; stage: "model" | "validate"; context?: Record<string, string> };
    };

export function statusOf(outcome: ResultOutcome): ResultStatus {
  if (outcome.ok) return "fallbackReason" in outcome ? "fallback" : "ok";
  switch (outcome.code) {
    case "DEADLINE_EXCEEDED":
      return "expired";
    case "EMPTY_TEXT":
    case "INVALID_TEXT":
      return "rejected";
    default:
      return "error";
  }
}

/** The outcome for a request whose deadline passed before inference. */
export function expiredOutcome(deadlineMs: number, nowMs: number): ResultOutcome {
  return {
    ok: false,
    code: "DEADLINE_EXCEEDED",
    message: `deadline passed ${Math.max(0, Math.round(nowMs - deadlineMs))} ms before inference; raise deadlineMs or reduce load`,
  };
}

export function buildResult(ctx: ResultContext, outcome: ResultOutcome): InferenceResult {
  const result: InferenceResult = {
    id: ctx.request.id,
    status: statusOf(outcome),
    output: outcome.ok ? outcome.output : null,
    model: { name: ctx.model.name, version: ctx.model.version },
    source: { topic: ctx.source.topic, partition: ctx.source.partition, offset: ctx.source.offset },
    timing: {
      requestTimestamp: ctx.requestTimestamp,
      queueMs: ctx.queueMs,
      inferenceMs: ctx.inferenceMs,
      batchSize: ctx.batchSize,
      completedAt: ctx.completedAt,
    },
    attributes: ctx.request.attributes ?? null,
    truncated: outcome.ok ? outcome.truncated : false,
    error: outcome.ok ? null : { code: outcome.code, message: outcome.message },
  };
  // Set after, in this order, rather than spread in: a spread of `{}` per result is a runtime call.
  if (outcome.ok && "fallbackReason" in outcome) result.fallbackReason = outcome.fallbackReason;
  if (ctx.runId) result.runId = ctx.runId;
  return result;
}

/**
 * Streaming rule: status error → dead letter (stage model, or validate for a tensor that does not fit
 * the model's signature, with its context headers); everything else → result.
 */
export function routeOutcome(ctx: ResultContext, outcome: ResultOutcome): OutcomeRoute {
  if (!outcome.ok && statusOf(outcome) === "error") {
    const { code, message } = outcome;
    // The version that failed it travels with the dead letter (`sluice.error.model-version`).
    const model = { "model-version": ctx.model.version };
    if ("stage" in outcome) {
      return {
        kind: "dead_letter",
        error: { code, message, stage: outcome.stage, context: { ...outcome.context, ...model } },
      };
    }
    return { kind: "dead_letter", error: { code, message, stage: "model", context: model } };
  }
  return { kind: "result", result: buildResult(ctx, outcome) };
}
