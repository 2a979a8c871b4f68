import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../../src/config/config-loader.js";
import { createKafka } from "../../../../src/kafka/client/kafka-client.js";
import { expectedTransient } from "../../../../src/kafka/client/kafka-log.js";
import { createLogger, type LogLevel } from "../../../../src/observability/logger.js";

/** A real pino root logger writing into an array, with serve's `kafkajs` child, behind a real kafkajs. */
function kafkaWithLogger(level: LogLevel = "info") {
  const lines: string[] = [];
  const root = createLogger({ level, destination: { write: (s: string) => void lines.push(s) } });
  const kafka = createKafka(loadConfig({ env: {} }).kafka, root.child({ component: "kafkajs" }));
  const parsed = () => lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  return { kafka, lines, parsed };
}

// Texts kafkajs logs for these conditions (kafkajs/src/protocol/error.js, consumer/runner.js, consumer/index.js).
const EXPECTED: [string, string, Record<string, unknown>][] = [
  [
    "Connection",
    "Response JoinGroup(key: 11, version: 5)",
    { error: "The group is rebalancing, so a rejoin is needed" },
  ],
  [
    "Connection",
    "Response Heartbeat(key: 12, version: 3)",
    { error: "The coordinator is not aware of this member" },
  ],
  [
    "Connection",
    "Response SyncGroup(key: 14, version: 3)",
    { error: "Specified group generation id is not valid" },
  ],
  [
    "Connection",
    "Response AddPartitionsToTxn(key: 24, version: 1)",
    {
      error:
        "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing",
    },
  ],
  [
    "Connection",
    "Response EndTxn(key: 26, version: 1)",
    {
      error:
        "Producer attempted an operation with an old epoch. Either there is a newer producer with the same transactionalId, or the producer's transaction has been expired by the broker",
    },
  ],
  ["Connection", "Response CreateTopics(key: 19, version: 2)", { error: "Topic creation errors" }],
  [
    "Connection",
    "Response Metadata(key: 3, version: 6)",
    { error: "There is no leader for this topic-partition as we are in the middle of a leadership election" },
  ],
  [
    "Connection",
    "Response FindCoordinator(key: 10, version: 2)",
    { error: "The group coordinator is not available" },
  ],
  ["Runner", "The coordinator is not aware of this member, re-joining the group", { groupId: "g" }],
  ["Runner", "The group is rebalancing, re-joining", { groupId: "g" }],
  ["Consumer", "Restarting the consumer in 300ms", { retryCount: 0, groupId: "g" }],
];

describe("kafkajs log mapping (logging policy)", () => {
  it("sends expected transient Kafka events to debug, never to error or warn", () => {
    const { kafka, parsed } = kafkaWithLogger("debug");
    for (const [namespace, message, fields] of EXPECTED)
      kafka.logger().namespace(namespace).error(message, fields);
    kafka.logger().namespace("Runner").warn("The group is rebalancing, re-joining", { groupId: "g" });
    const lines = parsed();
    expect(lines).toHaveLength(EXPECTED.length + 1);
    for (const line of lines) {
      expect(line["level"]).toBe(20);
      expect(typeof line["transient"]).toBe("string");
    }
    for (const [, message, fields] of EXPECTED) expect(expectedTransient(message, fields)).toBeDefined();
  });

  it("keeps other errors and warnings at their level, with namespace and fields, and component once", () => {
    const { kafka, lines, parsed } = kafkaWithLogger();
    const log = kafka.logger();
    log.info("connected", { broker: "b:1" });
    log.namespace("Connection").error("Response Produce(key: 0, version: 7)", {
      broker: "b:2",
      error: "The request included a message larger than the max message size the server will accept",
    });
    log.namespace("Consumer").warn("Consumer group received unsubscribed topics", { groupId: "g" });
    log.namespace("BrokerPool").error("Failed to connect to broker, reconnecting", {
      retryCount: 3,
      stack: "Error: at kafkajs internals",
    });
    expect(parsed().map((l) => [l["level"], l["namespace"], l["msg"]])).toEqual([
      [50, "Connection", "Response Produce(key: 0, version: 7)"],
      [40, "Consumer", "Consumer group received unsubscribed topics"],
      [50, "BrokerPool", "Failed to connect to broker, reconnecting"],
    ]);
    expect(parsed()[0]).toMatchObject({ component: "kafkajs", broker: "b:2" });
    // One "component" key per JSON line (pino would otherwise write it twice: child binding + field).
    for (const line of lines) expect(line.match(/"component"/g)).toHaveLength(1);
    // Stacks of kafkajs internals stay out of error lines.
    expect(parsed()[2]).not.toHaveProperty("stack");
  });

  it("forwards kafkajs INFO lines (joins, assignments) only at debug", () => {
    const atInfo = kafkaWithLogger("info");
    atInfo.kafka.logger().namespace("ConsumerGroup").info("Consumer has joined the group", { groupId: "g" });
    expect(atInfo.lines).toEqual([]);
    const atDebug = kafkaWithLogger("debug");
    atDebug.kafka.logger().namespace("ConsumerGroup").info("Consumer has joined the group", { groupId: "g" });
    expect(atDebug.parsed()).toMatchObject([
      { level: 20, msg: "Consumer has joined the group", groupId: "g" },
    ]);
  });

  it("is silent without a logger", () => {
    const kafka = createKafka(loadConfig({ env: {} }).kafka);
    expect(() => kafka.logger().error("nobody hears this")).not.toThrow();
  });
});
