import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import { NO_TRACING_TRACER, type PipelineTracer } from "./pipeline-tracer.js";
import { NO_SPANS, type SpanExportStats } from "./span-export-stats.js";

/**
 * The tracing of one process: a tracer provider (resource, sampler, the bounded export queue) and
 * the PipelineTracer the processor calls. Built once by a composition root with `createTracing`
 * (tracer-factory.ts) from `tracingSettings`; stopped with `shutdown()` after the processor, so its
 * last spans are exported.
 */
export interface Tracing {
  readonly enabled: boolean;
  readonly tracer: PipelineTracer;
  /** Spans queued, being exported, exported, dropped (queue full) and lost in failed exports: for metrics. */
  stats(): SpanExportStats;
  /** Exports what is queued now. */
  forceFlush(): Promise<void>;
  /** Exports what is queued, then stops; later spans are not recorded. Safe to call twice. */
  shutdown(): Promise<void>;
}

export interface TracingOptions {
  /** service.version. Default: Sluice's package version. */
  serviceVersion?: string;
  /** service.instance.id, e.g. `observability.instanceId`. Default: none. */
  instanceId?: string;
  /** messaging.consumer.group.name of request, batch and transaction spans. */
  consumerGroup?: string;
  /** Replaces the exporter the settings name (tests pass an InMemorySpanExporter). */
  exporter?: SpanExporter;
  /** Monotonic milliseconds for the request timings. Default `performance.now`. */
  now?: () => number;
  /**
   * Most links one span keeps: a micro-batch links each of its requests. Default 4096, the ceiling
   * of `batching.maxBatchSize` (the SDK's own default, 128, would cut large batches).
   */
  maxLinksPerSpan?: number;
}

/** Tracing off: no provider, no exporter, no queue; the tracer returns do-nothing spans. */
export const NO_TRACING: Tracing = Object.freeze({
  enabled: false,
  tracer: NO_TRACING_TRACER,
  stats: () => ({ ...NO_SPANS }),
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});
