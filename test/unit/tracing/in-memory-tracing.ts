import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { type TracingConfig, tracingSchema } from "../../../src/config/tracing-config-schema.js";
import { createTracing } from "../../../src/tracing/tracer-factory.js";
import type { Tracing, TracingOptions } from "../../../src/tracing/tracing.js";
import { tracingSettings } from "../../../src/tracing/tracing-settings.js";

/** Tracing on, exporting into memory: `finished()` flushes and returns the ended spans. */
export interface InMemoryTracing {
  tracing: Tracing;
  finished(): Promise<ReadableSpan[]>;
  /** The one finished span named `name` (of trace `traceId` when given). */
  named(spans: ReadableSpan[], name: string, traceId?: string): ReadableSpan;
}

export async function inMemoryTracing(
  config: Partial<TracingConfig> = {},
  options: Omit<TracingOptions, "exporter"> = {},
): Promise<InMemoryTracing> {
  const exporter = new InMemorySpanExporter();
  const settings = tracingSettings(
    tracingSchema.parse({ exporter: "console", scheduledDelayMs: 10, ...config }),
    {},
  );
  const tracing = await createTracing(settings, { serviceVersion: "0.0.0-test", ...options, exporter });
  return {
    tracing,
    finished: async () => {
      await tracing.forceFlush();
      return exporter.getFinishedSpans();
    },
    named: (spans, name, traceId) => {
      const found = spans.filter(
        (span) => span.name === name && (traceId === undefined || span.spanContext().traceId === traceId),
      );
      if (found.length !== 1)
        throw new Error(`${found.length} spans named ${name}: ${spans.map((s) => s.name)}`);
      return found[0]!;
    },
  };
}
