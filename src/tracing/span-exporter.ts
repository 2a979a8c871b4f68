import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import { SluiceError } from "../sluice-error.js";
import type { TracingSettings } from "./tracing-settings.js";

/**
 * The exporter `tracing.exporter` (OTEL_TRACES_EXPORTER) names, sending to the settings' endpoint.
 * The OTLP exporter also reads its own transport variables (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT,
 * _COMPRESSION, _CERTIFICATE and their _TRACES_ forms), so credentials for a hosted backend stay in
 * the environment and never pass through Sluice's configuration. Each exporter's package is loaded
 * when it is chosen (the OTLP one alone takes about half a second).
 */
/** The OTLP exporter's own default timeout: a shorter export timeout shortens it. */
const OTLP_TIMEOUT_MS = 10_000;

export async function spanExporter(
  settings: Pick<TracingSettings, "exporter" | "endpoint" | "serviceName" | "exportTimeoutMs">,
): Promise<SpanExporter> {
  switch (settings.exporter) {
    case "otlp": {
      const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
      // Its retries (with backoff, on refused connections and 5xx) stop within the export timeout.
      return new OTLPTraceExporter({
        url: endpointOf(settings),
        timeoutMillis: Math.min(settings.exportTimeoutMs, OTLP_TIMEOUT_MS),
      });
    }
    case "zipkin": {
      const { ZipkinExporter } = await import("@opentelemetry/exporter-zipkin");
      return new ZipkinExporter({ url: endpointOf(settings), serviceName: settings.serviceName });
    }
    case "console": {
      const { ConsoleSpanExporter } = await import("@opentelemetry/sdk-trace-base");
      return new ConsoleSpanExporter();
    }
    case "none":
      throw new SluiceError("INTERNAL", "no span exporter when tracing.exporter is none");
  }
}

function endpointOf(settings: Pick<TracingSettings, "exporter" | "endpoint">): string {
  if (settings.endpoint === undefined) {
    throw new SluiceError("INTERNAL", `tracing settings for ${settings.exporter} carry no endpoint`);
  }
  return settings.endpoint;
}
