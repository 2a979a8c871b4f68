import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { envNameFor, readEnvOverrides } from "../../../src/config/env-overrides.js";
import { isSluiceError } from "../../../src/sluice-error.js";

/** The error a call of readEnvOverrides throws (the test fails when it throws none). */
function overrideError(call: () => unknown): Error {
  try {
    call();
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected readEnvOverrides to throw");
}

describe("readEnvOverrides", () => {
  it("maps SLUICE_SECTION__KEY to section.key with schema-typed values", () => {
    const { values, sources } = readEnvOverrides({
      SLUICE_BATCHING__MAX_BATCH_SIZE: "64",
      SLUICE_BATCHING__BUCKETING: "false",
      SLUICE_TOPICS__REQUESTS: "a, b,c",
      SLUICE_MODEL__LABELS: '["neg","pos"]',
      SLUICE_MODEL__INPUT_NAMES: "input_ids=ids,attention_mask=mask",
      SLUICE_KAFKA__SASL__PASSWORD: "pw",
      SLUICE_CLIENT_ID: "not a config key (no __)",
      SLUICE_KAFKA_HOME: "/tmp/k",
      PATH: "/bin",
    });
    expect(values).toEqual({
      batching: { maxBatchSize: 64, bucketing: false },
      topics: { requests: ["a", "b", "c"] },
      model: { labels: ["neg", "pos"], inputNames: { input_ids: "ids", attention_mask: "mask" } },
      kafka: { sasl: { password: "pw" } },
    });
    expect(sources.get("batching.maxBatchSize")).toBe("environment variable SLUICE_BATCHING__MAX_BATCH_SIZE");
  });

  it("keeps text that is not a number or boolean so validation can report it", () => {
    const { values } = readEnvOverrides({ SLUICE_BATCHING__MAX_WAIT_MS: "soon", SLUICE_KAFKA__SSL: "maybe" });
    expect(values).toEqual({ batching: { maxWaitMs: "soon" }, kafka: { ssl: "maybe" } });
  });

  it("honours plain KAFKA_BROKERS, with SLUICE_KAFKA__BROKERS taking precedence", () => {
    expect(readEnvOverrides({ KAFKA_BROKERS: "h1:1,h2:2" }).values).toEqual({
      kafka: { brokers: ["h1:1", "h2:2"] },
    });
    expect(readEnvOverrides({ KAFKA_BROKERS: "h1:1", SLUICE_KAFKA__BROKERS: "h3:3" }).values).toEqual({
      kafka: { brokers: ["h3:3"] },
    });
  });

  it("an unknown key is an error naming the variable and the allowed keys", () => {
    const error = overrideError(() => readEnvOverrides({ SLUICE_BATCHING__MAX_BATCH: "1" }));
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect((error as Error).message).toContain("SLUICE_BATCHING__MAX_BATCH");
    expect((error as Error).message).toContain("MAX_BATCH_SIZE");
  });

  it("reaches the keys of a union's object form: SLUICE_KAFKA__SSL__CA_PATH sets kafka.ssl.caPath", () => {
    const { values, sources } = readEnvOverrides({
      SLUICE_KAFKA__SSL__CA_PATH: "/ca.pem",
      SLUICE_KAFKA__SSL__REJECT_UNAUTHORIZED: "no",
    });
    expect(values).toEqual({ kafka: { ssl: { caPath: "/ca.pem", rejectUnauthorized: false } } });
    expect(sources.get("kafka.ssl.caPath")).toBe("environment variable SLUICE_KAFKA__SSL__CA_PATH");
    const config = loadConfig({ env: { SLUICE_KAFKA__SSL__CA_PATH: "/ca.pem" }, cwd: "/nonexistent" });
    expect(config.kafka.ssl).toEqual({ caPath: "/ca.pem", rejectUnauthorized: true });
  });

  it("mixes a union's own variable with its sub-keys: true or JSON merge, false conflicts", () => {
    expect(
      readEnvOverrides({ SLUICE_KAFKA__SSL: "true", SLUICE_KAFKA__SSL__CA_PATH: "/ca.pem" }).values,
    ).toEqual({
      kafka: { ssl: { caPath: "/ca.pem" } },
    });
    expect(
      readEnvOverrides({
        SLUICE_KAFKA__SSL: '{"caPath":"/old.pem","servername":"kafka.internal"}',
        SLUICE_KAFKA__SSL__CA_PATH: "/new.pem",
      }).values,
    ).toEqual({ kafka: { ssl: { caPath: "/new.pem", servername: "kafka.internal" } } });
    const error = overrideError(() =>
      readEnvOverrides({ SLUICE_KAFKA__SSL: "false", SLUICE_KAFKA__SSL__CA_PATH: "/ca.pem" }),
    );
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect((error as Error).message).toContain(
      "environment variable SLUICE_KAFKA__SSL sets kafka.ssl to false, and SLUICE_KAFKA__SSL__CA_PATH sets kafka.ssl.caPath inside it; unset one of them",
    );
  });

  it("a bad value under a union is reported at its key, with its variable", () => {
    try {
      loadConfig({ env: { SLUICE_KAFKA__SSL__REJECT_UNAUTHORIZED: "maybe" }, cwd: "/nonexistent" });
      expect.unreachable();
    } catch (error) {
      expect((error as Error).message).toContain(
        'kafka.ssl.rejectUnauthorized = "maybe" (from environment variable SLUICE_KAFKA__SSL__REJECT_UNAUTHORIZED)',
      );
    }
  });

  it("a union's value is coerced by its members' types: model.workers is a number or auto", () => {
    expect(readEnvOverrides({ SLUICE_MODEL__WORKERS: "2" }).values).toEqual({ model: { workers: 2 } });
    expect(readEnvOverrides({ SLUICE_MODEL__WORKERS: "auto" }).values).toEqual({
      model: { workers: "auto" },
    });
    expect(() => loadConfig({ env: { SLUICE_MODEL__WORKERS: "0" }, cwd: "/nonexistent" })).toThrow(
      "model.workers = 0 (from environment variable SLUICE_MODEL__WORKERS): must be a positive number",
    );
  });

  it("a bad sub-key of a union names the keys of its object form and the JSON form", () => {
    const error = overrideError(() => readEnvOverrides({ SLUICE_KAFKA__SSL__CA_FILE: "/ca.pem" }));
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect((error as Error).message).toBe(
      "environment variable SLUICE_KAFKA__SSL__CA_FILE: unknown key CA_FILE under kafka.ssl; allowed: " +
        "CA_PATH, CERT_PATH, KEY_PATH, KEY_PASSWORD_FILE, SERVERNAME, REJECT_UNAUTHORIZED " +
        "(the keys of kafka.ssl's object form; SLUICE_KAFKA__SSL also takes that object as JSON)",
    );
    expect(() => readEnvOverrides({ SLUICE_MODEL__WORKERS__MAX: "2" })).toThrow(
      "unknown key MAX under model.workers; allowed: (no sub-keys)",
    );
  });

  it("envNameFor is the inverse mapping", () => {
    expect(envNameFor("batching.maxBatchSize")).toBe("SLUICE_BATCHING__MAX_BATCH_SIZE");
    expect(envNameFor("kafka.sasl.password")).toBe("SLUICE_KAFKA__SASL__PASSWORD");
  });
});
