import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { createKafka, type KafkaLogSink } from "../../../src/kafka/kafka-client.js";

function recordingSink(): KafkaLogSink & { lines: { level: string; obj: object; msg: string }[] } {
  const lines: { level: string; obj: object; msg: string }[] = [];
  return {
    lines,
    warn: (obj, msg) => lines.push({ level: "warn", obj, msg }),
    error: (obj, msg) => lines.push({ level: "error", obj, msg }),
  };
}

describe("createKafka", () => {
  it("forwards kafkajs warnings and errors (not info) to the logger with their fields", () => {
    const sink = recordingSink();
    const kafka = createKafka(loadConfig({ env: {} }).kafka, sink);
    const log = kafka.logger();
    log.info("connected", { broker: "b:1" });
    log.warn("slow", { broker: "b:1" });
    log.error("broken", { broker: "b:2", retryCount: 3 });
    expect(sink.lines.map((l) => [l.level, l.msg])).toEqual([
      ["warn", "slow"],
      ["error", "broken"],
    ]);
    expect(sink.lines[1]!.obj).toMatchObject({ component: "kafkajs", broker: "b:2", retryCount: 3 });
  });

  it("sends transient coordinator/leader response errors to debug, keeps other response errors", () => {
    const sink = recordingSink();
    const debug: string[] = [];
    const kafka = createKafka(loadConfig({ env: {} }).kafka, {
      ...sink,
      debug: (_obj, msg) => debug.push(msg),
    });
    const connection = kafka.logger().namespace("Connection");
    connection.error("Response GroupCoordinator(key: 10, version: 2)", {
      error: "The group coordinator is not available",
    });
    connection.error("Response Produce(key: 0, version: 7)", {
      error: "The request included a message larger than the max message size the server will accept",
    });
    expect(debug).toEqual(["Response GroupCoordinator(key: 10, version: 2)"]);
    expect(sink.lines.map((l) => [l.level, l.msg])).toEqual([
      ["error", "Response Produce(key: 0, version: 7)"],
    ]);
  });

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
