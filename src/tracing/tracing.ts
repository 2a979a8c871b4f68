import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { packageVersion } from "../config/project-paths.js";
import { OtelPipelineTracer } from "./otel-pipeline-tracer.js";
import { NO_TRACING_TRACER, type PipelineTracer } from "./pipeline-tracer.js";
import { RESOURCE_ATTR } from "./span-attributes.js";
import { NO_SPANS, SpanExportQueue, type SpanExportStats } from "./span-export-queue.js";
import { spanExporter } from "./span-exporter.js";
import { traceSampler } from "./trace-sampler.js";
import type { TracingSettings } from "./tracing-settings.js";

/**
 * The tracing of one process: a tracer provider (resource, sampler, the bounded export queue) and
 * the PipelineTracer the processor calls. Built once by a composition root from `tracingSettings`;
 * stopped with `shutdown()` after the processor, so its last spans are exported.
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

/**
 * Tracing as `settings` say: `NO_TRACING` when they name no exporter. `options.exporter` replaces
 * the named exporter (the settings must still enable tracing).
 */
export function createTracing(settings: TracingSettings, options: TracingOptions = {}): Tracing {
  if (!settings.enabled) return NO_TRACING;
  const serviceVersion = options.serviceVersion ?? packageVersion();
  const queue = new SpanExportQueue(options.exporter ?? spanExporter(settings), settings);
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        ...settings.resourceAttributes,
        [ATTR_SERVICE_NAME]: settings.serviceName,
        [ATTR_SERVICE_VERSION]: serviceVersion,
        ...(options.instanceId === undefined
          ? {}
          : { [RESOURCE_ATTR.serviceInstanceId]: options.instanceId }),
      }),
    ),
    sampler: traceSampler(settings),
    spanLimits: { linkCountLimit: options.maxLinksPerSpan ?? 4096 },
    spanProcessors: [queue],
  });
  const tracer = new OtelPipelineTracer(provider.getTracer("sluice", serviceVersion), {
    consumerGroup: options.consumerGroup,
    requestAttributes: settings.requestAttributes,
    ...(options.now ? { now: options.now } : {}),
  });
  let stopped: Promise<void> | undefined;
  return {
    enabled: true,
    tracer,
    stats: () => queue.stats(),
    forceFlush: () => provider.forceFlush().catch(() => {}),
    shutdown: () => {
      stopped ??= provider.shutdown().catch(() => {});
      return stopped;
    },
  };
}
