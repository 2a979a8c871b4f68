import type { RecordHeaders } from "../contracts/codec.js";
import type { InferenceResult } from "../contracts/inference.js";
import { RUN_ID_HEADER } from "../contracts/lane.js";
import type { EncodedResult } from "../contracts/result-codec.js";
import type { RequestSpan } from "../tracing/pipeline-tracer.js";
import {
  buildDeadLetter,
  buildPayloadlessDeadLetter,
  type DeadLetterError,
  type DeadLetterSource,
} from "./dead-letter.js";
import type { RememberedId } from "./dedup-segment.js";
import { estimateBytes, type RecordCompletion } from "./outbound-message.js";
import { type ResultContext, type ResultOutcome, routeOutcome } from "./result-builder.js";

export interface CompletionBuilderOptions {
  resultsTopic: string;
  /** Where results of the backfill lane go (`topics.backfillResults`). Default: `resultsTopic`. */
  backfillResultsTopic?: string;
  deadLetterTopic: string;
  /** Encodes a result for the results topic (the configured result codec); may throw. */
  encodeResult: (result: InferenceResult) => EncodedResult;
  /** Encodes a result for `backfillResultsTopic` (its own registry subject). Default: `encodeResult`. */
  encodeBackfillResult?: (result: InferenceResult) => EncodedResult;
  /** Most bytes of one dead letter (key + value + headers); bigger source values are cut to fit. */
  maxDeadLetterBytes: number;
}

/** Code of the payload-less dead letter that replaces outputs the broker refuses as too large. */
export const OUTPUT_TOO_LARGE = "OUTPUT_TOO_LARGE";

/**
 * The one place that turns what happened to an input record into what its transaction publishes:
 * a result or a dead letter (`outputs`) plus the request id it remembered (`remembered`), kept apart so
 * no publisher has to tell them apart by topic name. Pure: no I/O, no clock.
 */
export class CompletionBuilder {
  constructor(private readonly opts: CompletionBuilderOptions) {}

  /**
   * A record that ends as a dead letter (undecodable, invalid, failed in the model, unencodable).
   * With the request's `span`, the dead letter's `traceparent` points at it (docs/observability.md).
   */
  deadLetter(
    source: DeadLetterSource,
    error: DeadLetterError,
    remembered?: RememberedId,
    span?: RequestSpan,
  ): RecordCompletion {
    const dl = buildDeadLetter(source, error, { maxBytes: this.opts.maxDeadLetterBytes });
    return {
      outputs: [
        {
          topic: this.opts.deadLetterTopic,
          key: dl.key,
          value: dl.value,
          headers: withTraceHeaders(dl.headers, span),
          timestamp: dl.timestamp,
        },
      ],
      remembered,
      outcome: "dead_letter",
      errorCode: error.code,
      recordTimestampMs: Number(source.timestamp),
      deadLetter: {
        offset: source.offset,
        stage: error.stage,
        ...(source.key ? { key: source.key.toString("utf8") } : {}),
      },
      span,
    };
  }

  /** A request id already seen: counted, nothing published. */
  duplicate(recordTimestampMs: number, span?: RequestSpan): RecordCompletion {
    return { outputs: [], outcome: "duplicate", recordTimestampMs, span };
  }

  /**
   * A request that reached the end of the pipeline: a result, or a dead letter for per-item model
   * errors (the streaming rule of `routeOutcome`) and for results the codec cannot encode.
   */
  outcome(
    source: DeadLetterSource,
    ctx: ResultContext,
    outcome: ResultOutcome,
    remembered: RememberedId | undefined,
    span?: RequestSpan,
  ): RecordCompletion {
    const route = routeOutcome(ctx, outcome);
    if (route.kind === "dead_letter")
      return withRequestId(this.deadLetter(source, route.error, remembered, span), ctx.request.id);
    // Backfill results go to their own topic and carry the run id as a header too, so `backfill
    // status`/`export` find a run's results without decoding every record of a shared topic.
    const backfill = ctx.lane === "backfill";
    const encode = (backfill && this.opts.encodeBackfillResult) || this.opts.encodeResult;
    let encoded: EncodedResult;
    try {
      encoded = encode(route.result);
    } catch (error) {
      // e.g. a value the Avro schema rejects: this record fails, its neighbours don't.
      const message = `result could not be encoded: ${error instanceof Error ? error.message : String(error)}`;
      return withRequestId(
        this.deadLetter(source, { code: "INTERNAL", message, stage: "deliver" }, remembered, span),
        ctx.request.id,
      );
    }
    const topic = backfill
      ? (this.opts.backfillResultsTopic ?? this.opts.resultsTopic)
      : this.opts.resultsTopic;
    const headers = ctx.runId ? { ...encoded.headers, [RUN_ID_HEADER]: ctx.runId } : encoded.headers;
    const completion: RecordCompletion = {
      outputs: [
        { topic, key: ctx.request.id, value: encoded.value, headers: withTraceHeaders(headers, span) },
      ],
      remembered,
      outcome: "result",
      status: route.result.status,
      recordTimestampMs: Number(source.timestamp),
      span,
    };
    if (route.result.error) completion.errorCode = route.result.error.code;
    return completion;
  }
}

/**
 * `headers` with the request span's `traceparent` (and `tracestate`) in place of any the record
 * had, so a reader continues the request's trace; `headers` itself when tracing is off (no span
 * headers: nothing is read, copied or allocated).
 */
function withTraceHeaders<H extends RecordHeaders>(headers: H, span: RequestSpan | undefined): H {
  const trace = span?.traceHeaders();
  if (trace === undefined) return headers;
  const { traceparent: _parent, tracestate: _state, ...rest } = headers;
  return { ...rest, ...trace } as H;
}

function withRequestId(completion: RecordCompletion, requestId: string): RecordCompletion {
  const note = completion.deadLetter;
  return note ? { ...completion, deadLetter: { ...note, requestId } } : completion;
}

/**
 * A record's outputs replaced by one payload-less dead letter (error headers only), for outputs the
 * broker refused as too large even alone; its remembered id is kept.
 */
export function withoutPayload(
  completion: RecordCompletion,
  source: { topic: string; partition: number; offset: string },
  deadLetterTopic: string,
): RecordCompletion {
  const outputBytes = completion.outputs.reduce((n, m) => n + estimateBytes(m), 0);
  const dl = buildPayloadlessDeadLetter(
    source,
    {
      code: OUTPUT_TOO_LARGE,
      message: `the broker refused this record's ${completion.outcome} (about ${outputBytes} bytes) as too large; it was dead-lettered without key, value or headers`,
      stage: "deliver",
    },
    outputBytes,
  );
  return {
    outputs: [
      {
        topic: deadLetterTopic,
        key: dl.key,
        value: dl.value,
        headers: withTraceHeaders(dl.headers, completion.span),
      },
    ],
    remembered: completion.remembered,
    outcome: "dead_letter",
    errorCode: OUTPUT_TOO_LARGE,
    recordTimestampMs: completion.recordTimestampMs,
    deadLetter: { ...completion.deadLetter, offset: source.offset, stage: "deliver" },
    span: completion.span,
  };
}
