import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { createKafka } from "../../../src/kafka/client/kafka-client.js";

describe("createKafka", () => {
  it("is silent without a logger and accepts SASL settings", () => {
    const config = loadConfig({
      env: {
        SLUICE_KAFKA__SASL__MECHANISM: "scram-sha-512",
        SLUICE_KAFKA__SASL__USERNAME: "u",
        SLUICE_KAFKA__SASL__PASSWORD: "p",
        SLUICE_KAFKA__SSL: "true",
      },
    });
    const kafka = createKafka(config.kafka);
    expect(() => kafka.logger().error("nobody hears this")).not.toThrow();
    expect(typeof kafka.producer).toBe("function");
  });
});
