import { randomBytes } from "node:crypto";
import { Kafka, logLevel } from "kafkajs";
import { inject } from "vitest";

/**
 * Integration tests get their broker from here. The vitest global setup decides where it comes
 * from (KAFKA_BROKERS, testcontainers, or the project's local broker) and provides the address.
 */
export function testBrokers(): string[] {
  const provided = inject("kafkaBrokers") as string | undefined;
  const value = provided ?? process.env.KAFKA_BROKERS;
  if (!value) throw new Error("No Kafka broker for tests: the vitest global setup did not provide one");
  return value.split(",").map((b) => b.trim());
}

/** Random, valid topic/group name so tests never share state. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(4).toString("hex")}`;
}

export function testKafka(clientId = uniqueName("test")): Kafka {
  return new Kafka({ clientId, brokers: testBrokers(), logLevel: logLevel.NOTHING });
}

export async function createTopics(
  topics: { topic: string; numPartitions?: number; configEntries?: { name: string; value: string }[] }[],
): Promise<void> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) => ({ replicationFactor: 1, numPartitions: 1, ...t })),
    });
  } finally {
    await admin.disconnect();
  }
}
