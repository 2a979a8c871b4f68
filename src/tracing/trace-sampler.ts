import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import type { TracingSettings } from "./tracing-settings.js";

/**
 * The sampler `tracing.sampler` (OTEL_TRACES_SAMPLER) names, as the OpenTelemetry SDK
 * specification defines them. The parentbased ones follow a request's incoming `traceparent`
 * (sampled flag set: recorded; clear: not) and apply their root sampler to requests without one,
 * and to the micro-batch and transaction spans, which start traces of their own.
 */
export function traceSampler(settings: Pick<TracingSettings, "sampler" | "samplerRatio">): Sampler {
  switch (settings.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(settings.samplerRatio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.samplerRatio) });
  }
}
