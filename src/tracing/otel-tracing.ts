import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { OtelPipelineTracer } from "./otel-pipeline-tracer.js";
import { RESOURCE_ATTR } from "./span-attributes.js";
import { SpanExportQueue } from "./span-export-queue.js";
import { spanExporter } from "./span-exporter.js";
import { traceSampler } from "./trace-sampler.js";
import type { Tracing, TracingOptions } from "./tracing.js";
import type { TracingSettings } from "./tracing-settings.js";

/**
 * The OpenTelemetry SDK side of `createTracing`, loaded only when tracing is on (the SDK and its
 * exporters take a noticeable part of a second to load): the provider with its resource, sampler
 * and link limit, the bounded export queue, and the PipelineTracer on its tracer.
 */
export async function startOtelTracing(
  settings: TracingSettings,
  options: TracingOptions & { serviceVersion: string },
): Promise<Tracing> {
  const queue = new SpanExportQueue(options.exporter ?? (await spanExporter(settings)), settings);
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({
        ...settings.resourceAttributes,
        [ATTR_SERVICE_NAME]: settings.serviceName,
        [ATTR_SERVICE_VERSION]: options.serviceVersion,
        ...(options.instanceId === undefined
          ? {}
          : { [RESOURCE_ATTR.serviceInstanceId]: options.instanceId }),
      }),
    ),
    sampler: traceSampler(settings),
    spanLimits: { linkCountLimit: options.maxLinksPerSpan ?? 4096 },
    spanProcessors: [queue],
  });
  const tracer = new OtelPipelineTracer(provider.getTracer("sluice", options.serviceVersion), {
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
