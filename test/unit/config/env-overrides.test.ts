import { describe, expect, it } from "vitest";
import { envNameFor, readEnvOverrides } from "../../../src/config/env-overrides.js";
import { isSluiceError } from "../../../src/sluice-error.js";

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
    try {
      readEnvOverrides({ SLUICE_BATCHING__MAX_BATCH: "1" });
      expect.unreachable();
    } catch (error) {
      expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
      expect((error as Error).message).toContain("SLUICE_BATCHING__MAX_BATCH");
      expect((error as Error).message).toContain("MAX_BATCH_SIZE");
    }
  });

  it("envNameFor is the inverse mapping", () => {
    expect(envNameFor("batching.maxBatchSize")).toBe("SLUICE_BATCHING__MAX_BATCH_SIZE");
    expect(envNameFor("kafka.sasl.password")).toBe("SLUICE_KAFKA__SASL__PASSWORD");
  });
});
