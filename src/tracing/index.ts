/**
 * OpenTelemetry tracing of requests through Sluice (docs/observability.md, "Tracing"). Composition
 * roots build one `Tracing` per process from `tracingSettings(config.tracing)`; the pipeline calls
 * its `PipelineTracer` and never branches on whether tracing is on.
 */
export {
  extractTraceContext,
  injectTraceContext,
  TRACEPARENT_HEADER,
  TRACESTATE_HEADER,
  traceHeadersOf,
} from "./kafka-trace-context.js";
export {
  type BatchSpan,
  type ModelCallSpan,
  NO_TRACING_TRACER,
  type PipelineTracer,
  type RequestOutcome,
  type RequestSpan,
  type Traced,
  type TracedRecord,
  type TransactionFailure,
  type TransactionSpan,
} from "./pipeline-tracer.js";
export { ATTR, SPAN_NAME } from "./span-attributes.js";
export type { SpanExportStats } from "./span-export-queue.js";
export { createTracing, NO_TRACING, type Tracing, type TracingOptions } from "./tracing.js";
export { OTEL_VARIABLES, type TracingSettings, tracingOff, tracingSettings } from "./tracing-settings.js";
