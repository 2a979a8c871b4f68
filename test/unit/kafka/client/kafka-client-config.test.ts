import { type LogEntry, logLevel } from "kafkajs";
import { describe, expect, it } from "vitest";
import { createKafkaFromClientConfig } from "../../../../src/kafka/client/kafka-client.js";
import { kafkaFailure } from "../../../../src/kafka/client/kafka-failure.js";

describe("createKafkaFromClientConfig (the library API's client)", () => {
  it("is known to the failure classifier: an unreachable broker is named in the message", () => {
    const kafka = createKafkaFromClientConfig({ brokers: ["broker-a:9092"], clientId: "reader" });
    const failure = kafkaFailure(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }), {
      doing: "reading freshness heartbeats",
      kafka,
    });
    expect(failure).toMatchObject({ code: "BROKER_UNAVAILABLE" });
    expect(failure!.message).toContain("broker-a:9092");
  });

  it("stays silent without a logCreator, and gives a user's logCreator the entries at its level", () => {
    const silent = createKafkaFromClientConfig({ brokers: ["b:9092"] });
    expect(() => silent.logger().error("nobody listens")).not.toThrow();

    const seen: LogEntry[] = [];
    const kafka = createKafkaFromClientConfig({
      brokers: ["b:9092"],
      logLevel: logLevel.WARN,
      logCreator: () => (entry) => seen.push(entry),
    });
    kafka.logger().warn("a warning");
    kafka.logger().info("an info line");
    expect(seen.map((e) => e.log.message)).toEqual(["a warning"]);
  });
});
