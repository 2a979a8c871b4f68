import { randomBytes } from "node:crypto";
import { Kafka, type KafkaMessage, logLevel, type Message, type Producer } from "kafkajs";
import { inject } from "vitest";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { readKafkaRanges } from "../../src/kafka/read/kafka-range-reader.js";

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

/**
 * A kafkajs client for tests, with the read_committed fix applied the way `createKafka` applies it in
 * Sluice itself (src/kafka/protocol/aborted-transaction-order.ts).
 */
export function testKafka(clientId = uniqueName("test")): Kafka {
  fixAbortedTransactionOrder();
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

/**
 * A transactional producer (idempotent, one request in flight, as Kafka transactions require).
 * `kafka` defaults to a fresh test client; pass one to share its connection settings.
 */
export function transactionalProducer(transactionalId: string, kafka: Kafka = testKafka()): Producer {
  return kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
}

/** Commits consumer-group offsets the way the processor does: a transactional producer's sendOffsets. */
export async function commitGroupOffsets(
  kafka: Kafka,
  groupId: string,
  topic: string,
  partitions: { partition: number; offset: string }[],
): Promise<void> {
  const producer = transactionalProducer(uniqueName("obs-tx"), kafka);
  await producer.connect();
  try {
    const tx = await producer.transaction();
    await tx.sendOffsets({ consumerGroupId: groupId, topics: [{ topic, partitions }] });
    await tx.commit();
  } finally {
    await producer.disconnect();
  }
}

/**
 * Sends `messages` to `topic` with a plain (non-transactional) producer: one request, or `chunkSize`
 * messages per request so large fixtures stay under the broker's request size.
 */
export async function produceMessages(
  topic: string,
  messages: Message[],
  opts: { kafka?: Kafka; chunkSize?: number } = {},
): Promise<void> {
  const producer = (opts.kafka ?? testKafka()).producer();
  const chunkSize = Math.max(1, opts.chunkSize ?? messages.length);
  await producer.connect();
  try {
    for (let i = 0; i < messages.length; i += chunkSize)
      await producer.send({ topic, messages: messages.slice(i, i + chunkSize) });
  } finally {
    await producer.disconnect();
  }
}

/**
 * Every committed record of `topic` as a read_committed reader sees it (readKafkaRanges never returns
 * uncommitted or aborted data), partition by partition, up to the end offsets at the call.
 */
export async function committedRecords(topic: string, kafka: Kafka = testKafka()): Promise<KafkaMessage[]> {
  const admin = kafka.admin();
  await admin.connect();
  const offsets = await admin.fetchTopicOffsets(topic).finally(() => admin.disconnect());
  const out: KafkaMessage[] = [];
  for await (const { message } of readKafkaRanges({
    kafka,
    topic,
    ranges: offsets.map((o) => ({ partition: o.partition, startOffset: o.low, endOffset: o.high })),
  })) {
    out.push(message);
  }
  return out;
}
