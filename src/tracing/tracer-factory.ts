import { packageVersion } from "../config/project-paths.js";
import { NO_TRACING, type Tracing, type TracingOptions } from "./tracing.js";
import type { TracingSettings } from "./tracing-settings.js";

/*
 * The tracer factory. It loads no OpenTelemetry code itself: the SDK and the chosen exporter
 * (otel-tracing.ts) are loaded only when tracing is on, so a process with tracing off never loads
 * them (they take a noticeable part of a second).
 */

/**
 * Tracing as `settings` say: `NO_TRACING` when they name no exporter (nothing is loaded or started);
 * else the SDK is loaded and a provider started. `options.exporter` replaces the named exporter (the
 * settings must still enable tracing).
 */
export async function createTracing(
  settings: TracingSettings,
  options: TracingOptions = {},
): Promise<Tracing> {
  if (!settings.enabled) return NO_TRACING;
  const { startOtelTracing } = await import("./otel-tracing.js");
  return startOtelTracing(settings, {
    ...options,
    serviceVersion: options.serviceVersion ?? packageVersion(),
  });
}
