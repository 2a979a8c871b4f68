import { z } from "zod";
import { positiveInt } from "./config-fields.js";

/** Where spans go: `none` (the default) turns tracing off and costs nothing on the hot path. */
export const TRACES_EXPORTERS = ["none", "otlp", "zipkin", "console"] as const;

/** The OpenTelemetry SDK's sampler names (`OTEL_TRACES_SAMPLER`) that Sluice supports. */
export const TRACES_SAMPLERS = [
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
  "always_on",
  "always_off",
  "traceidratio",
] as const;

/**
 * The `tracing` section (docs/observability.md, "Tracing"): OpenTelemetry traces of requests through
 * Sluice. The standard `OTEL_*` variables override these keys (env wins, as the OpenTelemetry
 * specification says); `src/tracing/tracing-settings.ts` merges them and validates the result
 * through this schema, so file and environment follow the same rules.
 */
export const tracingSchema = z
  .strictObject({
    exporter: z
      .enum(TRACES_EXPORTERS)
      .default("none")
      .describe(
        "Where spans are exported: none (tracing off, no cost), otlp (OTLP/HTTP JSON), zipkin (Zipkin v2 JSON) or console (stdout, for debugging). OTEL_TRACES_EXPORTER overrides it.",
      ),
    endpoint: z
      .url({ protocol: /^https?$/, error: "must be an http:// or https:// URL" })
      .optional()
      .describe(
        "URL spans are sent to: the OTLP traces URL (e.g. http://collector:4318/v1/traces) or the Zipkin spans URL (e.g. http://zipkin:9411/api/v2/spans); unset = the exporter's standard default on localhost. OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_ZIPKIN_ENDPOINT override it.",
      ),
    serviceName: z
      .string()
      .min(1)
      .default("sluice")
      .describe("The service.name of every span. OTEL_SERVICE_NAME overrides it."),
    resourceAttributes: z
      .record(z.string().min(1), z.string())
      .default({})
      .refine((attributes) => !("service.name" in attributes), {
        error: "must not set service.name: set tracing.serviceName (or OTEL_SERVICE_NAME) instead",
      })
      .describe(
        "Extra resource attributes of every span (deployment.environment.name, k8s.pod.name, ...). OTEL_RESOURCE_ATTRIBUTES adds to them and wins on the same key.",
      ),
    sampler: z
      .enum(TRACES_SAMPLERS)
      .default("parentbased_always_on")
      .describe(
        "Which traces are recorded: parentbased_* follow the request's sampled flag and apply the rest to requests without a trace context; traceidratio keeps samplerRatio of traces. OTEL_TRACES_SAMPLER overrides it.",
      ),
    samplerRatio: z
      .number()
      .min(0)
      .max(1)
      .default(1)
      .describe(
        "Share of new traces kept by the traceidratio samplers, 0..1. OTEL_TRACES_SAMPLER_ARG overrides it.",
      ),
    maxQueueSize: positiveInt()
      .default(2048)
      .describe(
        "Ended spans held for export; further spans are dropped and counted (a slow or dead collector never holds up processing). OTEL_BSP_MAX_QUEUE_SIZE overrides it.",
      ),
    maxExportBatchSize: positiveInt()
      .default(512)
      .describe(
        "Most spans per export request; at most maxQueueSize. OTEL_BSP_MAX_EXPORT_BATCH_SIZE overrides it.",
      ),
    scheduledDelayMs: positiveInt()
      .default(5000)
      .describe("Longest wait between exports, ms. OTEL_BSP_SCHEDULE_DELAY overrides it."),
    exportTimeoutMs: positiveInt()
      .default(30_000)
      .describe(
        "How long one export may take before the next batch goes, ms. OTEL_BSP_EXPORT_TIMEOUT overrides it.",
      ),
    requestAttributes: z
      .array(z.string().min(1))
      .default([])
      .describe(
        "Names of request attributes whose values are recorded on request spans (opt-in: attribute values may be payload; none by default).",
      ),
  })
  .refine((t) => t.maxExportBatchSize <= t.maxQueueSize, {
    path: ["maxExportBatchSize"],
    error: "must be at most tracing.maxQueueSize",
  })
  .describe("OpenTelemetry traces (docs/observability.md, Tracing); off unless an exporter is set.");

export type TracingConfig = z.output<typeof tracingSchema>;
