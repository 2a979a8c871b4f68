import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../../src/config/config-loader.js";
import { createKafka } from "../../../../src/kafka/client/kafka-client.js";

describe("createKafka log forwarding of connection retries", () => {
  it("a connection attempt kafkajs retries is a warning without a stack trace, not an ERROR", () => {
    const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
    const kafka = createKafka(loadConfig({ env: {} }).kafka, {
      warn: (obj, msg) => lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
      error: (obj, msg) => lines.push({ level: "error", obj: obj as Record<string, unknown>, msg }),
    });
    kafka.logger().namespace("Connection").error("Connection error: connect ECONNREFUSED 127.0.0.1:1", {
      broker: "127.0.0.1:1",
      stack: "Error: connect ECONNREFUSED\n    at TCPConnectWrap.afterConnect",
    });
    kafka
      .logger()
      .namespace("BrokerPool")
      .error("Failed to connect to seed broker, trying another broker from the list", {
        retryCount: 0,
      });
    expect(lines.map((l) => l.level)).toEqual(["warn", "warn"]);
    expect(lines[0]!.obj).toMatchObject({ broker: "127.0.0.1:1" });
    expect(lines[0]!.obj["stack"]).toBeUndefined();
  });
});
