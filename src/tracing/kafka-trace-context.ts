import {
  type Context,
  ROOT_CONTEXT,
  type SpanContext,
  type TextMapGetter,
  type TextMapSetter,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { RecordHeaders } from "../contracts/codec.js";

/**
 * W3C trace context in Kafka record headers: `traceparent` and `tracestate`, lower-case as the W3C
 * specification writes them. kafkajs hands headers over as Buffers (a string when a producer in
 * this process set one) and as an array when a name repeats; outgoing headers are Buffers. Of
 * repeated headers the first `traceparent` counts and the `tracestate` values join into one list,
 * as the OpenTelemetry propagator does for HTTP.
 */
export const TRACEPARENT_HEADER = "traceparent";
export const TRACESTATE_HEADER = "tracestate";

const propagator = new W3CTraceContextPropagator();

const text = (value: Buffer | string): string => (typeof value === "string" ? value : value.toString("utf8"));

const headerGetter: TextMapGetter<RecordHeaders> = {
  keys: (carrier) => Object.keys(carrier),
  get(carrier, key) {
    const value = carrier[key];
    if (value === undefined) return undefined;
    return Array.isArray(value) ? value.map(text) : text(value);
  },
};

const headerSetter: TextMapSetter<RecordHeaders> = {
  set(carrier, key, value) {
    carrier[key] = Buffer.from(value, "utf8");
  },
};

/**
 * The trace context a record carries, as a parent for its spans: ROOT_CONTEXT (a new trace) when it
 * has no `traceparent` or an invalid one. A record without the header costs one property read.
 */
export function extractTraceContext(headers: RecordHeaders | undefined): Context {
  if (headers?.[TRACEPARENT_HEADER] === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, headers, headerGetter);
}

/**
 * Writes the context's span as `traceparent` (and its `tracestate`, when it has one) into `headers`
 * as Buffers, replacing any there; nothing when the context holds no valid span. Returns `headers`.
 */
export function injectTraceContext(context: Context, headers: RecordHeaders): RecordHeaders {
  propagator.inject(context, headers, headerSetter);
  return headers;
}

/** The headers that point a record at `span`: `{ traceparent, tracestate? }` as Buffers. */
export function traceHeadersOf(span: SpanContext): RecordHeaders {
  return injectTraceContext(trace.setSpanContext(ROOT_CONTEXT, span), {});
}
