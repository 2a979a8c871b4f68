import type { RecordHeaders } from "../contracts/codec.js";
import type { FallbackReason, ModelIdentity, ResultStatus } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";

/**
 * The spans of a request's way through Sluice, as the processor calls them (docs/observability.md,
 * "Tracing"). One implementation records OpenTelemetry spans (otel-pipeline-tracer.ts); the other,
 * `NO_TRACING_TRACER`, is what callers get when tracing is off: every method returns a shared
 * do-nothing object, so callers never branch and the hot path does no tracing work at all.
 *
 * Arguments are what the processor already holds (the fetched record, its items and completions),
 * so a call allocates nothing when tracing is off. Nothing here takes request text, keys, ids or
 * outputs; error arguments are codes (`DECODE_FAILED`), and anything else passed as one is recorded
 * as `UNKNOWN`.
 */
export interface PipelineTracer {
  /** True when spans are recorded (an exporter is set). */
  readonly enabled: boolean;
  /**
   * At intake, when a fetched record is taken: its request span, a child of the context in the
   * record's `traceparent`/`tracestate` headers (a new trace, sampled by the sampler, when it has
   * none). Ends with `commit` or `abort`.
   */
  startRequest(topic: string, partition: number, record: TracedRecord, lane: Lane): RequestSpan;
  /**
   * When a micro-batch is formed and goes to the model: its `process <topic>` span, with a link to
   * each request span (the span of each item's request; items without one are skipped). Marks the
   * end of each request's queue time.
   */
  startBatch(lane: Lane, reason: string, items: readonly Traced[]): BatchSpan;
  /**
   * When a transaction of an input partition starts sending: its `commit <topic>` span, a child of
   * the micro-batch of its first request (linked to the other micro-batches it holds).
   */
  startTransaction(topic: string, partition: number, items: readonly Traced[]): TransactionSpan;
}

/** A fetched record as the tracer reads it: a kafkajs `KafkaMessage` (or the processor's FetchedRecord) fits. */
export interface TracedRecord {
  readonly offset: string;
  readonly headers?: RecordHeaders | undefined;
}

/** Anything that carries a request's span: the processor's work items and record completions. */
export interface Traced {
  readonly span?: RequestSpan | undefined;
}

/**
 * How a request ended, as the delivery room's `RecordCompletion` says it (it fits this shape): the
 * outcome, a result's status and fallback reason, the error code, the dead letter's stage.
 */
export interface RequestOutcome {
  readonly outcome: "result" | "dead_letter" | "duplicate";
  readonly status?: ResultStatus | undefined;
  readonly fallbackReason?: FallbackReason | undefined;
  readonly errorCode?: string | undefined;
  readonly deadLetter?: { readonly stage: string } | undefined;
}

/** How a transaction ended when it did not commit (the `transaction.finished` outcomes). */
export type TransactionFailure = "aborted" | "fenced" | "failed";

export interface RequestSpan {
  /**
   * Intake is done (decoded, deduplicated) and the request waits for a micro-batch. `attributes`
   * are the request's attributes: only the names in `tracing.requestAttributes` are recorded.
   */
  queued(attributes?: Readonly<Record<string, string>> | null): void;
  /** Its completion was built (result, dead letter or duplicate); the commit comes next. */
  completed(outcome: RequestOutcome): void;
  /**
   * Headers for the request's result record: the `traceparent` (and `tracestate`) of this span, as
   * Buffers. Undefined when tracing is off. The same object on every call: copy, do not modify.
   */
  traceHeaders(): RecordHeaders | undefined;
  /** Its transaction committed: the span ends (TransactionSpan.commit calls this for its requests). */
  commit(): void;
  /**
   * Given up without a commit (the partition was reset, revoked or closed, the transaction failed
   * for good): the span ends with error status naming `code`. Later calls do nothing.
   */
  abort(code?: string): void;
}

export interface BatchSpan {
  /** The model call of this micro-batch: `items` sent, with `tokens` (0 when not counted). */
  modelCall(model: ModelIdentity | undefined, items: number, tokens: number): ModelCallSpan;
  /** The batch's completions are handed to the committers (error status when `errorCode` is given). */
  end(errorCode?: string): void;
}

export interface ModelCallSpan {
  /**
   * The model answered (or failed: `errorCode`). Each request of the batch not completed yet gets
   * the call's duration as its inference time.
   */
  end(errorCode?: string): void;
}

export interface TransactionSpan {
  /** The records are sent; the offsets and the commit follow. */
  sent(): void;
  /** Committed: ends this span, then each request span in it. */
  commit(): void;
  /**
   * Not committed: ends this span with error status. Its request spans stay open, since their
   * records are retried (after a size refusal, in another transaction) or given up by the partition
   * (`RequestSpan.abort`).
   */
  abort(outcome: TransactionFailure, code?: string): void;
}

const NO_REQUEST_SPAN: RequestSpan = Object.freeze({
  queued() {},
  completed() {},
  traceHeaders: () => undefined,
  commit() {},
  abort() {},
});
const NO_MODEL_CALL_SPAN: ModelCallSpan = Object.freeze({ end() {} });
const NO_BATCH_SPAN: BatchSpan = Object.freeze({ modelCall: () => NO_MODEL_CALL_SPAN, end() {} });
const NO_TRANSACTION_SPAN: TransactionSpan = Object.freeze({ sent() {}, commit() {}, abort() {} });

/** Tracing off: the same frozen do-nothing span for every call. */
export const NO_TRACING_TRACER: PipelineTracer = Object.freeze({
  enabled: false,
  startRequest: () => NO_REQUEST_SPAN,
  startBatch: () => NO_BATCH_SPAN,
  startTransaction: () => NO_TRANSACTION_SPAN,
});
