import { type TracingConfig, tracingSchema } from "../config/tracing-config-schema.js";
import { SluiceError } from "../sluice-error.js";

/**
 * The tracing settings of one process: the `tracing` section with the standard OpenTelemetry
 * variables applied over it (env wins, as the OpenTelemetry specification says), validated once at
 * the edge. Only `OTEL_*` names of the SDK specification are read; an empty variable counts as
 * unset. Differences from the specification, on purpose: no exporter is the default (tracing costs
 * nothing until one is set), one exporter at a time, and OTLP is sent as JSON over HTTP.
 */
export interface TracingSettings extends Readonly<Omit<TracingConfig, "endpoint">> {
  /** False when the exporter is `none` (or OTEL_SDK_DISABLED=true): nothing is traced at all. */
  readonly enabled: boolean;
  /** The URL spans go to (otlp, zipkin); undefined for console and none. */
  readonly endpoint: string | undefined;
}

/** The OpenTelemetry variables Sluice reads, and the `tracing` key each overrides. */
export const OTEL_VARIABLES = {
  OTEL_SDK_DISABLED: "exporter",
  OTEL_TRACES_EXPORTER: "exporter",
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "endpoint",
  OTEL_EXPORTER_OTLP_ENDPOINT: "endpoint",
  OTEL_EXPORTER_ZIPKIN_ENDPOINT: "endpoint",
  OTEL_SERVICE_NAME: "serviceName",
  OTEL_RESOURCE_ATTRIBUTES: "resourceAttributes",
  OTEL_TRACES_SAMPLER: "sampler",
  OTEL_TRACES_SAMPLER_ARG: "samplerRatio",
  OTEL_BSP_MAX_QUEUE_SIZE: "maxQueueSize",
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "maxExportBatchSize",
  OTEL_BSP_SCHEDULE_DELAY: "scheduledDelayMs",
  OTEL_BSP_EXPORT_TIMEOUT: "exportTimeoutMs",
} as const satisfies Record<string, keyof TracingConfig>;

/** The specification's default endpoints. */
export const DEFAULT_OTLP_TRACES_ENDPOINT = "http://localhost:4318/v1/traces";
export const DEFAULT_ZIPKIN_ENDPOINT = "http://localhost:9411/api/v2/spans";

const OTLP_PROTOCOL_VARIABLES = [
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
] as const;
const NUMERIC_VARIABLES = [
  "OTEL_TRACES_SAMPLER_ARG",
  "OTEL_BSP_MAX_QUEUE_SIZE",
  "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
  "OTEL_BSP_SCHEDULE_DELAY",
  "OTEL_BSP_EXPORT_TIMEOUT",
] as const;

type Env = Readonly<Record<string, string | undefined>>;

/**
 * `section` (the parsed `tracing` configuration) with the OTEL_* variables of `env` applied, as one
 * validated object. Throws SluiceError CONFIG_INVALID naming the variable or key and what to set.
 */
export function tracingSettings(section: TracingConfig, env: Env = process.env): TracingSettings {
  const read = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === "" ? undefined : value;
  };
  const merged: Record<string, unknown> = { ...section };
  /** tracing key → the variable that set it, for error messages. */
  const sources = new Map<string, string>();
  const set = (variable: keyof typeof OTEL_VARIABLES, value: unknown) => {
    merged[OTEL_VARIABLES[variable]] = value;
    sources.set(OTEL_VARIABLES[variable], `${variable}=${JSON.stringify(read(variable))}`);
  };

  const exporter = read("OTEL_TRACES_EXPORTER");
  if (exporter !== undefined) set("OTEL_TRACES_EXPORTER", oneExporter(exporter));
  if (read("OTEL_SDK_DISABLED")?.toLowerCase() === "true") set("OTEL_SDK_DISABLED", "none");

  const service = read("OTEL_SERVICE_NAME");
  const resource = read("OTEL_RESOURCE_ATTRIBUTES");
  if (resource !== undefined) {
    const { "service.name": fromResource, ...rest } = resourceAttributes(resource);
    set("OTEL_RESOURCE_ATTRIBUTES", { ...section.resourceAttributes, ...rest });
    // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES (the specification).
    if (fromResource !== undefined && service === undefined) {
      merged["serviceName"] = fromResource;
      sources.set("serviceName", "service.name in OTEL_RESOURCE_ATTRIBUTES");
    }
  }
  if (service !== undefined) set("OTEL_SERVICE_NAME", service);

  const sampler = read("OTEL_TRACES_SAMPLER");
  if (sampler !== undefined) set("OTEL_TRACES_SAMPLER", sampler.toLowerCase());
  for (const variable of NUMERIC_VARIABLES) {
    const raw = read(variable);
    if (raw !== undefined) set(variable, Number.isFinite(Number(raw)) ? Number(raw) : raw);
  }

  const chosen = merged["exporter"];
  if (chosen === "otlp") {
    const traces = read("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    const base = read("OTEL_EXPORTER_OTLP_ENDPOINT");
    if (traces !== undefined) set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces);
    else if (base !== undefined) set("OTEL_EXPORTER_OTLP_ENDPOINT", `${base.replace(/\/+$/, "")}/v1/traces`);
    checkOtlpProtocol(read);
  } else if (chosen === "zipkin") {
    const zipkin = read("OTEL_EXPORTER_ZIPKIN_ENDPOINT");
    if (zipkin !== undefined) set("OTEL_EXPORTER_ZIPKIN_ENDPOINT", zipkin);
  }

  const parsed = tracingSchema.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? "");
      const where = sources.get(key) ?? `tracing.${key}`;
      const described = key === "" ? undefined : tracingSchema.shape[key as keyof TracingConfig]?.description;
      return `  ${where} (tracing.${key}): ${issue.message}${described ? ` [${described}]` : ""}`;
    });
    throw new SluiceError(
      "CONFIG_INVALID",
      `invalid tracing settings (${problems.length} problem${problems.length === 1 ? "" : "s"}):\n${problems.join("\n")}`,
    );
  }
  const settings = parsed.data;
  const enabled = settings.exporter !== "none";
  const endpoint =
    settings.exporter === "otlp"
      ? (settings.endpoint ?? DEFAULT_OTLP_TRACES_ENDPOINT)
      : settings.exporter === "zipkin"
        ? (settings.endpoint ?? DEFAULT_ZIPKIN_ENDPOINT)
        : undefined;
  return Object.freeze({ ...settings, enabled, endpoint });
}

/** Tracing off: what a process without any tracing configuration gets. */
export function tracingOff(): TracingSettings {
  return tracingSettings(tracingSchema.parse({}), {});
}

/** `OTEL_TRACES_EXPORTER`: one exporter name (a list of one, or `none` beside nothing else). */
function oneExporter(raw: string): string {
  const names = [...new Set(raw.split(",").map((name) => name.trim().toLowerCase()))].filter(Boolean);
  const active = names.filter((name) => name !== "none");
  if (active.length > 1) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `OTEL_TRACES_EXPORTER=${JSON.stringify(raw)}: Sluice exports spans to one backend; set one of otlp, zipkin, console or none (send to several through an OpenTelemetry Collector)`,
    );
  }
  return active[0] ?? "none";
}

/**
 * `OTEL_RESOURCE_ATTRIBUTES`: `key1=value1,key2=value2`, values percent-encoded (the W3C Baggage
 * octet range). A malformed entry is an error, not silently dropped.
 */
function resourceAttributes(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of raw.split(",")) {
    if (entry.trim() === "") continue;
    const eq = entry.indexOf("=");
    const key = eq < 0 ? "" : entry.slice(0, eq).trim();
    let value: string | undefined;
    try {
      value = eq < 0 ? undefined : decodeURIComponent(entry.slice(eq + 1).trim());
    } catch {
      value = undefined;
    }
    if (key === "" || value === undefined) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `OTEL_RESOURCE_ATTRIBUTES: entry ${JSON.stringify(entry.trim())} is not key=value (values percent-encoded, e.g. deployment.environment.name=prod,team=search%20infra)`,
      );
    }
    out[key] = value;
  }
  return out;
}

/** Sluice's OTLP exporter speaks OTLP/HTTP with JSON; a collector set up for gRPC would never answer. */
function checkOtlpProtocol(read: (name: string) => string | undefined): void {
  for (const variable of OTLP_PROTOCOL_VARIABLES) {
    const protocol = read(variable);
    if (protocol === undefined) continue;
    if (protocol.toLowerCase() !== "http/json") {
      throw new SluiceError(
        "CONFIG_INVALID",
        `${variable}=${JSON.stringify(protocol)}: Sluice sends OTLP as JSON over HTTP; set ${variable}=http/json or unset it, and point the endpoint at the collector's OTLP/HTTP port (4318 on an OpenTelemetry Collector, which takes JSON and protobuf)`,
      );
    }
    return; // the traces-specific variable, when set, wins over the general one
  }
}
