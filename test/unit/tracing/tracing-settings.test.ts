import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { type TracingConfig, tracingSchema } from "../../../src/config/tracing-config-schema.js";
import { tracingOff, tracingSettings } from "../../../src/tracing/tracing-settings.js";

const section = (values: Partial<TracingConfig> = {}): TracingConfig => tracingSchema.parse(values);
const invalid = (message: RegExp) =>
  expect.objectContaining({ code: "CONFIG_INVALID", message: expect.stringMatching(message) });

describe("tracing settings from the tracing section and OTEL_* variables", () => {
  it("is off by default: no exporter, no endpoint", () => {
    const off = tracingSettings(section(), {});
    expect(off).toMatchObject({
      enabled: false,
      exporter: "none",
      endpoint: undefined,
      serviceName: "sluice",
    });
    expect(off.sampler).toBe("parentbased_always_on");
    expect(tracingOff().enabled).toBe(false);
  });

  it("OTEL_TRACES_EXPORTER turns it on, with the specification's default endpoints", () => {
    expect(tracingSettings(section(), { OTEL_TRACES_EXPORTER: "zipkin" })).toMatchObject({
      enabled: true,
      exporter: "zipkin",
      endpoint: "http://localhost:9411/api/v2/spans",
    });
    expect(tracingSettings(section(), { OTEL_TRACES_EXPORTER: " OTLP " })).toMatchObject({
      exporter: "otlp",
      endpoint: "http://localhost:4318/v1/traces",
    });
    expect(tracingSettings(section(), { OTEL_TRACES_EXPORTER: "console" })).toMatchObject({
      enabled: true,
      endpoint: undefined,
    });
    expect(tracingSettings(section(), { OTEL_TRACES_EXPORTER: "none,zipkin" }).exporter).toBe("zipkin");
  });

  it("OTLP: the traces endpoint is used as is, the general one gets /v1/traces", () => {
    const base = { OTEL_TRACES_EXPORTER: "otlp", OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" };
    expect(tracingSettings(section(), base).endpoint).toBe("http://collector:4318/v1/traces");
    expect(
      tracingSettings(section(), {
        ...base,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://otel.example/traces",
      }).endpoint,
    ).toBe("https://otel.example/traces");
    expect(
      tracingSettings(section({ endpoint: "http://file:4318/v1/traces" }), { OTEL_TRACES_EXPORTER: "otlp" })
        .endpoint,
    ).toBe("http://file:4318/v1/traces");
  });

  it("Zipkin: OTEL_EXPORTER_ZIPKIN_ENDPOINT wins over tracing.endpoint; OTLP variables do not apply", () => {
    const file = section({ exporter: "zipkin", endpoint: "http://file:9411/api/v2/spans" });
    expect(tracingSettings(file, {}).endpoint).toBe("http://file:9411/api/v2/spans");
    expect(tracingSettings(file, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://otlp:4318" }).endpoint).toBe(
      "http://file:9411/api/v2/spans",
    );
    expect(
      tracingSettings(file, { OTEL_EXPORTER_ZIPKIN_ENDPOINT: "http://127.0.0.1:9999/api/v2/spans" }).endpoint,
    ).toBe("http://127.0.0.1:9999/api/v2/spans");
  });

  it("env wins over the file key by key; empty variables count as unset", () => {
    const file = section({
      exporter: "zipkin",
      serviceName: "from-file",
      sampler: "always_on",
      maxQueueSize: 1000,
    });
    const settings = tracingSettings(file, {
      OTEL_SERVICE_NAME: "from-env",
      OTEL_TRACES_SAMPLER: "",
      OTEL_BSP_MAX_QUEUE_SIZE: "64",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "32",
      OTEL_BSP_SCHEDULE_DELAY: "250",
      OTEL_BSP_EXPORT_TIMEOUT: "1000",
    });
    expect(settings).toMatchObject({
      exporter: "zipkin",
      serviceName: "from-env",
      sampler: "always_on",
      maxQueueSize: 64,
      maxExportBatchSize: 32,
      scheduledDelayMs: 250,
      exportTimeoutMs: 1000,
    });
  });

  it("OTEL_SDK_DISABLED=true turns tracing off whatever else is set", () => {
    const settings = tracingSettings(section({ exporter: "otlp" }), {
      OTEL_TRACES_EXPORTER: "zipkin",
      OTEL_SDK_DISABLED: "TRUE",
    });
    expect(settings).toMatchObject({ enabled: false, exporter: "none", endpoint: undefined });
    expect(tracingSettings(section({ exporter: "otlp" }), { OTEL_SDK_DISABLED: "false" }).enabled).toBe(true);
  });

  it("OTEL_RESOURCE_ATTRIBUTES adds to tracing.resourceAttributes, percent-decoded; its service.name yields to OTEL_SERVICE_NAME", () => {
    const file = section({ resourceAttributes: { team: "search", region: "eu" } });
    const env = {
      OTEL_RESOURCE_ATTRIBUTES:
        "region=us%2Deast, deployment.environment.name=prod,note=a%20b c,service.name=svc",
    };
    const settings = tracingSettings(file, env);
    expect(settings.resourceAttributes).toEqual({
      team: "search",
      region: "us-east",
      "deployment.environment.name": "prod",
      note: "a b c",
    });
    expect(settings.serviceName).toBe("svc");
    expect(tracingSettings(file, { ...env, OTEL_SERVICE_NAME: "named" }).serviceName).toBe("named");
  });

  it("samplers and their ratio", () => {
    expect(
      tracingSettings(section(), { OTEL_TRACES_SAMPLER: "TraceIdRatio", OTEL_TRACES_SAMPLER_ARG: "0.25" }),
    ).toMatchObject({
      sampler: "traceidratio",
      samplerRatio: 0.25,
    });
    for (const sampler of ["always_on", "always_off", "parentbased_always_off", "parentbased_traceidratio"]) {
      expect(tracingSettings(section(), { OTEL_TRACES_SAMPLER: sampler }).sampler).toBe(sampler);
    }
  });

  it("bad values are CONFIG_INVALID naming the variable, the key and what it takes", () => {
    expect(() => tracingSettings(section(), { OTEL_TRACES_EXPORTER: "jaeger" })).toThrow(
      invalid(/OTEL_TRACES_EXPORTER="jaeger" \(tracing\.exporter\): .*"otlp".*\[Where spans are exported/),
    );
    expect(() => tracingSettings(section(), { OTEL_TRACES_SAMPLER: "jaeger_remote" })).toThrow(
      invalid(/OTEL_TRACES_SAMPLER="jaeger_remote" \(tracing\.sampler\): .*parentbased_always_on/),
    );
    expect(() => tracingSettings(section(), { OTEL_TRACES_SAMPLER_ARG: "2" })).toThrow(
      invalid(/OTEL_TRACES_SAMPLER_ARG="2" \(tracing\.samplerRatio\): Too big/),
    );
    expect(() => tracingSettings(section(), { OTEL_TRACES_SAMPLER_ARG: "half" })).toThrow(
      invalid(/OTEL_TRACES_SAMPLER_ARG="half" \(tracing\.samplerRatio\)/),
    );
    expect(() => tracingSettings(section(), { OTEL_BSP_MAX_QUEUE_SIZE: "-1" })).toThrow(
      invalid(/OTEL_BSP_MAX_QUEUE_SIZE="-1" \(tracing\.maxQueueSize\): must be a positive number/),
    );
    expect(() => tracingSettings(section(), { OTEL_BSP_MAX_QUEUE_SIZE: "10" })).toThrow(
      invalid(
        /tracing\.maxExportBatchSize \(tracing\.maxExportBatchSize\): must be at most tracing\.maxQueueSize/,
      ),
    );
    expect(() =>
      tracingSettings(section(), {
        OTEL_TRACES_EXPORTER: "zipkin",
        OTEL_EXPORTER_ZIPKIN_ENDPOINT: "127.0.0.1:9411",
      }),
    ).toThrow(
      invalid(/OTEL_EXPORTER_ZIPKIN_ENDPOINT="127\.0\.0\.1:9411" \(tracing\.endpoint\): must be an http/),
    );
    expect(() => tracingSettings(section(), { OTEL_RESOURCE_ATTRIBUTES: "team" })).toThrow(
      invalid(/OTEL_RESOURCE_ATTRIBUTES: entry "team" is not key=value/),
    );
    expect(() => tracingSettings(section(), { OTEL_RESOURCE_ATTRIBUTES: "a=%zz" })).toThrow(
      invalid(/OTEL_RESOURCE_ATTRIBUTES: entry "a=%zz"/),
    );
    expect(() => tracingSettings(section(), { OTEL_TRACES_EXPORTER: "otlp,zipkin" })).toThrow(
      invalid(/one backend; set one of otlp, zipkin, console or none/),
    );
  });

  it("OTLP is JSON over HTTP: another protocol is CONFIG_INVALID saying what to set", () => {
    const otlp = { OTEL_TRACES_EXPORTER: "otlp" };
    expect(() => tracingSettings(section(), { ...otlp, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      invalid(
        /OTEL_EXPORTER_OTLP_PROTOCOL="grpc": Sluice sends OTLP as JSON over HTTP; set OTEL_EXPORTER_OTLP_PROTOCOL=http\/json/,
      ),
    );
    expect(
      tracingSettings(section(), {
        ...otlp,
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      }).exporter,
    ).toBe("otlp");
    // Not read unless the exporter is OTLP.
    expect(tracingSettings(section(), { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }).enabled).toBe(false);
  });

  it("the tracing.* keys load from the config file layers like every section (SLUICE_TRACING__*)", () => {
    const config = loadConfig({
      env: {
        SLUICE_TRACING__EXPORTER: "zipkin",
        SLUICE_TRACING__RESOURCE_ATTRIBUTES: "team=search",
        SLUICE_TRACING__REQUEST_ATTRIBUTES: "tenant,channel",
      },
    });
    expect(config.tracing).toMatchObject({
      exporter: "zipkin",
      resourceAttributes: { team: "search" },
      requestAttributes: ["tenant", "channel"],
    });
    expect(() =>
      loadConfig({ env: {}, overrides: { tracing: { resourceAttributes: { "service.name": "x" } } } }),
    ).toThrow(invalid(/tracing\.resourceAttributes .*must not set service\.name: set tracing\.serviceName/));
  });
});
