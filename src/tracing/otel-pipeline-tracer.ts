import {
  type Attributes,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { RecordHeaders } from "../contracts/codec.js";
import type { ModelIdentity } from "../contracts/inference.js";
import { type Lane, runIdFromHeaders } from "../contracts/lane.js";
import { extractTraceContext, traceHeadersOf } from "./kafka-trace-context.js";
import type {
  BatchSpan,
  ModelCallSpan,
  PipelineTracer,
  RequestOutcome,
  RequestSpan,
  Traced,
  TracedRecord,
  TransactionFailure,
  TransactionSpan,
} from "./pipeline-tracer.js";
import {
  ATTR,
  MESSAGING_SYSTEM_KAFKA,
  OPERATION_TYPE_PROCESS,
  OPERATION_TYPE_SETTLE,
  REQUEST_ATTRIBUTE_PREFIX,
  SPAN_EVENT,
  SPAN_NAME,
} from "./span-attributes.js";

export interface OtelPipelineTracerOptions {
  /** messaging.consumer.group.name of the spans; omitted when undefined (batch mode). */
  consumerGroup?: string | undefined;
  /** Request attribute names whose values go on request spans (`tracing.requestAttributes`). */
  requestAttributes?: readonly string[];
  /** Milliseconds for the timings (monotonic). Default `performance.now`. */
  now?: () => number;
}

/** Longest opted-in request attribute value recorded; longer ones are cut. */
export const MAX_REQUEST_ATTRIBUTE_CHARS = 256;

/** Error codes are Sluice's own constants (DECODE_FAILED); anything else is recorded as UNKNOWN. */
const ERROR_CODE = /^[A-Z][A-Z0-9_]{0,63}$/;
/** Statuses, stages, reasons: short lower-case words. */
const WORD = /^[a-z][a-z_]{0,31}$/;

const code = (value: string | undefined): string =>
  value !== undefined && ERROR_CODE.test(value) ? value : "UNKNOWN";
/** A status message: what happened, and the code when there is one. */
const why = (what: string, errorCode: string | undefined): string =>
  errorCode === undefined ? what : `${what} ${code(errorCode)}`;
const word = (value: string): string => (WORD.test(value) ? value : "unknown");
const ms = (value: number): number => Math.round(Math.max(0, value) * 1000) / 1000;

/**
 * PipelineTracer on an OpenTelemetry tracer. Contexts are passed explicitly (no global context
 * manager, no async hooks): a request span's parent is its record's trace context, a batch's spans
 * hang from the batch span, a transaction from its first request's batch.
 */
export class OtelPipelineTracer implements PipelineTracer {
  readonly enabled = true;
  readonly #tracer: Tracer;
  readonly #group: string | undefined;
  readonly #requestAttributes: readonly string[];
  readonly #now: () => number;

  constructor(tracer: Tracer, options: OtelPipelineTracerOptions = {}) {
    this.#tracer = tracer;
    this.#group = options.consumerGroup;
    this.#requestAttributes = options.requestAttributes ?? [];
    this.#now = options.now ?? (() => performance.now());
  }

  startRequest(topic: string, partition: number, record: TracedRecord, lane: Lane): RequestSpan {
    const attributes = this.#messaging(OPERATION_TYPE_PROCESS, topic, partition);
    const offset = Number(record.offset);
    if (Number.isSafeInteger(offset)) attributes[ATTR.messagingKafkaOffset] = offset;
    attributes[ATTR.lane] = lane;
    if (lane === "backfill") {
      const runId = runIdFromHeaders(record.headers);
      if (runId !== undefined) attributes[ATTR.runId] = runId;
    }
    const span = this.#tracer.startSpan(
      SPAN_NAME.request(topic),
      { kind: SpanKind.CONSUMER, attributes },
      extractTraceContext(record.headers),
    );
    return new OtelRequestSpan(span, topic, partition, this.#requestAttributes, this.#now);
  }

  startBatch(lane: Lane, reason: string, items: readonly Traced[]): BatchSpan {
    const requests = requestSpansOf(items);
    const first = requests[0];
    const oneTopic = first !== undefined && requests.every((r) => r.topic === first.topic);
    const onePartition = oneTopic && requests.every((r) => r.partition === first.partition);
    const attributes: Attributes = {
      [ATTR.messagingSystem]: MESSAGING_SYSTEM_KAFKA,
      [ATTR.messagingOperationType]: OPERATION_TYPE_PROCESS,
      [ATTR.messagingOperationName]: OPERATION_TYPE_PROCESS,
      [ATTR.messagingBatchMessageCount]: requests.length,
      [ATTR.lane]: lane,
      [ATTR.flushReason]: word(reason),
    };
    if (oneTopic) attributes[ATTR.messagingDestinationName] = first.topic;
    if (onePartition) attributes[ATTR.messagingDestinationPartitionId] = String(first.partition);
    if (this.#group !== undefined) attributes[ATTR.messagingConsumerGroupName] = this.#group;
    const links: Link[] = requests.map((r) => ({ context: r.span.spanContext() }));
    const span = this.#tracer.startSpan(
      SPAN_NAME.batch(oneTopic ? first.topic : undefined),
      { kind: SpanKind.CONSUMER, attributes, links },
      ROOT_CONTEXT,
    );
    const at = this.#now();
    const name = SPAN_NAME.batch(oneTopic ? first.topic : undefined);
    for (const request of requests) request.joined(this.#tracer, name, span.spanContext(), attributes, at);
    return new OtelBatchSpan(this.#tracer, span, requests, this.#now);
  }

  startTransaction(topic: string, partition: number, items: readonly Traced[]): TransactionSpan {
    const requests = requestSpansOf(items);
    const batches = new Map<string, SpanContext>();
    for (const request of requests) {
      const batch = request.batch;
      if (batch !== undefined && !batches.has(batch.spanId)) batches.set(batch.spanId, batch);
    }
    const [parent, ...others] = batches.values();
    const parentContext = parent ?? requests[0]?.span.spanContext();
    const attributes = this.#messaging(OPERATION_TYPE_SETTLE, topic, partition);
    attributes[ATTR.messagingOperationName] = "commit";
    attributes[ATTR.messagingBatchMessageCount] = requests.length;
    const span = this.#tracer.startSpan(
      SPAN_NAME.transaction(topic),
      { kind: SpanKind.PRODUCER, attributes, links: others.map((context) => ({ context })) },
      parentContext === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parentContext),
    );
    // The same transaction in each request's own trace (Zipkin and other backends without links
    // show a request's trace alone): a child of the request span, linked to the transaction span.
    const link: Link[] = [{ context: span.spanContext() }];
    const own = requests.map((request) =>
      request.child(this.#tracer, SPAN_NAME.transaction(topic), SpanKind.PRODUCER, attributes, link),
    );
    return new OtelTransactionSpan(span, requests, own);
  }

  #messaging(operation: string, topic: string, partition: number): Attributes {
    const attributes: Attributes = {
      [ATTR.messagingSystem]: MESSAGING_SYSTEM_KAFKA,
      [ATTR.messagingOperationType]: operation,
      [ATTR.messagingOperationName]: operation,
      [ATTR.messagingDestinationName]: topic,
      [ATTR.messagingDestinationPartitionId]: String(partition),
    };
    if (this.#group !== undefined) attributes[ATTR.messagingConsumerGroupName] = this.#group;
    return attributes;
  }
}

function requestSpansOf(items: readonly Traced[]): OtelRequestSpan[] {
  const spans: OtelRequestSpan[] = [];
  for (const item of items) if (item.span instanceof OtelRequestSpan) spans.push(item.span);
  return spans;
}

class OtelRequestSpan implements RequestSpan {
  readonly span: Span;
  readonly topic: string;
  readonly partition: number;
  /** The micro-batch span this request went to the model in. */
  batch: SpanContext | undefined;
  /** This request's part of that micro-batch, in the request's own trace (ends at `completed`). */
  process: Span | undefined;
  readonly #allowed: readonly string[];
  readonly #now: () => number;
  readonly #startedAt: number;
  #queuedAt: number | undefined;
  #completedAt: number | undefined;
  #headers: RecordHeaders | undefined;
  #ended = false;

  constructor(span: Span, topic: string, partition: number, allowed: readonly string[], now: () => number) {
    this.span = span;
    this.topic = topic;
    this.partition = partition;
    this.#allowed = allowed;
    this.#now = now;
    this.#startedAt = now();
  }

  queued(attributes?: Readonly<Record<string, string>> | null): void {
    if (this.#ended || this.#queuedAt !== undefined) return;
    this.#queuedAt = this.#now();
    this.span.setAttribute(ATTR.intakeMs, ms(this.#queuedAt - this.#startedAt));
    if (!attributes) return;
    for (const name of this.#allowed) {
      const value = attributes[name];
      if (typeof value === "string") {
        this.span.setAttribute(REQUEST_ATTRIBUTE_PREFIX + name, value.slice(0, MAX_REQUEST_ATTRIBUTE_CHARS));
      }
    }
  }

  /**
   * Joined micro-batch `batch` at `at`: the queue time ends, the span links to the batch, and a
   * `process` child (named and attributed like the batch span, linked to it) stands for the batch
   * in the request's own trace until the request completes.
   */
  joined(tracer: Tracer, name: string, batch: SpanContext, attributes: Attributes, at: number): void {
    if (this.#ended) return;
    this.batch = batch;
    this.span.setAttribute(ATTR.queueMs, ms(at - (this.#queuedAt ?? this.#startedAt)));
    this.span.addLink({ context: batch });
    if (this.#completedAt === undefined && this.process === undefined)
      this.process = this.child(tracer, name, SpanKind.INTERNAL, attributes, [{ context: batch }]);
  }

  /**
   * A child span of this request's span (or of `parent`, one of its children) for its part of a
   * micro-batch, a model call or a transaction; none when the request is not sampled (or has ended),
   * so an unsampled request costs no more.
   */
  child(
    tracer: Tracer,
    name: string,
    kind: SpanKind,
    attributes: Attributes,
    links: Link[],
    parent: Span = this.span,
  ): Span | undefined {
    if (this.#ended || !this.span.isRecording()) return undefined;
    return tracer.startSpan(name, { kind, attributes, links }, trace.setSpan(ROOT_CONTEXT, parent));
  }

  /** True once completed (expired, fallback or finished): a later model call was not its own. */
  get isCompleted(): boolean {
    return this.#completedAt !== undefined;
  }

  /** Its batch's model call took `duration` ms; ignored once completed (expired before the call). */
  inferred(duration: number): void {
    if (this.#ended || this.#completedAt !== undefined) return;
    this.span.setAttribute(ATTR.inferenceMs, ms(duration));
  }

  completed(outcome: RequestOutcome): void {
    if (this.#ended || this.#completedAt !== undefined) return;
    this.#completedAt = this.#now();
    this.process?.end();
    // Finished at intake (a dead letter of decode or validate, a duplicate): intake ends here.
    if (this.#queuedAt === undefined)
      this.span.setAttribute(ATTR.intakeMs, ms(this.#completedAt - this.#startedAt));
    this.span.setAttribute(ATTR.outcome, word(outcome.outcome));
    if (outcome.status !== undefined) this.span.setAttribute(ATTR.resultStatus, word(outcome.status));
    if (outcome.fallbackReason !== undefined) {
      this.span.setAttribute(ATTR.fallbackReason, word(outcome.fallbackReason));
    }
    if (outcome.errorCode !== undefined) this.span.setAttribute(ATTR.errorCode, code(outcome.errorCode));
    if (outcome.deadLetter !== undefined) {
      this.span.setAttribute(ATTR.deadLetterStage, word(outcome.deadLetter.stage));
    }
    if (outcome.outcome === "dead_letter") {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: why("dead letter", outcome.errorCode) });
    } else if (outcome.status === "error") {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: why("error", outcome.errorCode) });
    }
  }

  traceHeaders(): RecordHeaders {
    this.#headers ??= traceHeadersOf(this.span.spanContext());
    return this.#headers;
  }

  commit(): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#completedAt === undefined) this.process?.end();
    this.span.setAttribute(ATTR.commitMs, ms(this.#now() - (this.#completedAt ?? this.#startedAt)));
    this.span.end();
  }

  abort(errorCode?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (this.#completedAt === undefined) this.process?.end();
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: why("aborted", errorCode) });
    this.span.end();
  }
}

/**
 * Ends a span and its copies in the requests' traces, with the same attributes and status
 * (`errorCode` set: error status naming `what` and the code).
 */
function endAll(
  spans: readonly (Span | undefined)[],
  attributes: Attributes,
  failure?: { what: string; errorCode: string | undefined },
): void {
  for (const span of spans) {
    if (span === undefined) continue;
    span.setAttributes(attributes);
    if (failure)
      span.setStatus({ code: SpanStatusCode.ERROR, message: why(failure.what, failure.errorCode) });
    span.end();
  }
}

class OtelBatchSpan implements BatchSpan {
  readonly #tracer: Tracer;
  readonly #span: Span;
  readonly #requests: readonly OtelRequestSpan[];
  readonly #now: () => number;
  #ended = false;

  constructor(tracer: Tracer, span: Span, requests: readonly OtelRequestSpan[], now: () => number) {
    this.#tracer = tracer;
    this.#span = span;
    this.#requests = requests;
    this.#now = now;
  }

  modelCall(model: ModelIdentity | undefined, items: number, tokens: number): ModelCallSpan {
    const attributes: Attributes = { [ATTR.modelItems]: items, [ATTR.modelTokens]: tokens };
    if (model !== undefined) {
      attributes[ATTR.modelName] = model.name;
      attributes[ATTR.modelVersion] = model.version;
    }
    const name = SPAN_NAME.modelCall(model?.name);
    const span = this.#tracer.startSpan(
      name,
      { kind: SpanKind.INTERNAL, attributes },
      trace.setSpan(ROOT_CONTEXT, this.#span),
    );
    // The call in each request's trace, under its `process` span: only requests it answers
    // (expired and fallback ones completed before it).
    const link: Link[] = [{ context: span.spanContext() }];
    const calls = [span];
    const requests: OtelRequestSpan[] = [];
    for (const request of this.#requests) {
      if (request.isCompleted) continue;
      requests.push(request);
      if (request.process !== undefined)
        calls.push(
          ...optional(
            request.child(this.#tracer, name, SpanKind.INTERNAL, attributes, link, request.process),
          ),
        );
    }
    return new OtelModelCallSpan(calls, requests, this.#now);
  }

  end(errorCode?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    if (errorCode !== undefined)
      this.#span.setStatus({ code: SpanStatusCode.ERROR, message: code(errorCode) });
    this.#span.end();
  }
}

const optional = (span: Span | undefined): Span[] => (span === undefined ? [] : [span]);

class OtelModelCallSpan implements ModelCallSpan {
  /** The call's span in the batch's trace, then its copies in the requests' traces. */
  readonly #spans: readonly Span[];
  readonly #requests: readonly OtelRequestSpan[];
  readonly #now: () => number;
  readonly #startedAt: number;
  #ended = false;

  constructor(spans: readonly Span[], requests: readonly OtelRequestSpan[], now: () => number) {
    this.#spans = spans;
    this.#requests = requests;
    this.#now = now;
    this.#startedAt = now();
  }

  end(errorCode?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const duration = this.#now() - this.#startedAt;
    for (const request of this.#requests) request.inferred(duration);
    if (errorCode === undefined) endAll(this.#spans, {});
    else
      for (const span of this.#spans) {
        span.setAttribute(ATTR.errorCode, code(errorCode));
        span.setStatus({ code: SpanStatusCode.ERROR, message: code(errorCode) });
        span.end();
      }
  }
}

class OtelTransactionSpan implements TransactionSpan {
  /** The transaction's span, then its copies in the requests' traces. */
  readonly #spans: readonly Span[];
  readonly #requests: readonly OtelRequestSpan[];
  #ended = false;

  constructor(span: Span, requests: readonly OtelRequestSpan[], own: readonly (Span | undefined)[]) {
    this.#spans = [span, ...own.flatMap(optional)];
    this.#requests = requests;
  }

  sent(): void {
    if (!this.#ended) for (const span of this.#spans) span.addEvent(SPAN_EVENT.sent);
  }

  commit(): void {
    if (this.#ended) return;
    this.#ended = true;
    endAll(this.#spans, { [ATTR.transactionOutcome]: "committed" });
    for (const request of this.#requests) request.commit();
  }

  abort(outcome: TransactionFailure, errorCode?: string): void {
    if (this.#ended) return;
    this.#ended = true;
    const attributes: Attributes = { [ATTR.transactionOutcome]: word(outcome) };
    if (errorCode !== undefined) attributes[ATTR.errorCode] = code(errorCode);
    endAll(this.#spans, attributes, { what: word(outcome), errorCode });
  }
}
