/**
 * OpenTelemetry tracing of requests through Sluice (docs/observability.md, "Tracing"). Composition
 * roots build one `Tracing` per process with `createTracing(tracingSettings(config.tracing))`; the
 * pipeline calls its `PipelineTracer` and never branches on whether tracing is on. Nothing exported
 * here loads the OpenTelemetry SDK: `createTracing` loads it when tracing is on (the W3C header
 * helpers, `kafka-trace-context.ts`, are imported directly where needed).
 */
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
export type { SpanExportStats } from "./span-export-stats.js";
export { createTracing } from "./tracer-factory.js";
export { NO_TRACING, type Tracing, type TracingOptions } from "./tracing.js";
export { OTEL_VARIABLES, type TracingSettings, tracingOff, tracingSettings } from "./tracing-settings.js";
