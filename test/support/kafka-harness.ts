import { randomBytes } from "node:crypto";
import {
  Kafka,
  type KafkaMessage,
  logLevel,
  type Message,
  type Producer,
  type RecordMetadata,
  type Transaction,
} from "kafkajs";
import { inject } from "vitest";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { fixThrottleCheckDelay } from "../../src/kafka/protocol/throttle-check-delay.js";
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
 * A kafkajs client for tests, with the read_committed fix and the throttle check delay applied the way
 * `createKafka` applies them in Sluice itself (src/kafka/protocol/aborted-transaction-order.ts,
 * throttle-check-delay.ts).
 */
export function testKafka(clientId = uniqueName("test")): Kafka {
  fixAbortedTransactionOrder();
  fixThrottleCheckDelay();
  return new Kafka({ clientId, brokers: testBrokers(), logLevel: logLevel.NOTHING });
}

/**
 * Creates `topics` and waits until every partition has a leader. kafkajs's own wait (`waitForLeaders`)
 * gives up when a busy broker's metadata does not list a just-created topic yet (it retries only
 * LEADER_NOT_AVAILABLE, not UNKNOWN_TOPIC_OR_PARTITION), so the wait here retries both.
 */
export async function createTopics(
  topics: { topic: string; numPartitions?: number; configEntries?: { name: string; value: string }[] }[],
): Promise<void> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: false,
      topics: topics.map((t) => ({ replicationFactor: 1, numPartitions: 1, ...t })),
    });
    const names = topics.map((t) => t.topic);
    for (const deadline = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 50))) {
      const led = await admin.fetchTopicMetadata({ topics: names }).then(
        (m) => m.topics.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)),
        (error: { type?: string }) => {
          if (error.type !== "UNKNOWN_TOPIC_OR_PARTITION" && error.type !== "LEADER_NOT_AVAILABLE")
            throw error;
          return false;
        },
      );
      if (led) return;
      if (Date.now() > deadline) throw new Error(`topics ${names.join(", ")} got no leaders in 30 s`);
    }
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

/**
 * Commits or aborts `txn` and returns once its markers are written. commit()/abort() return when
 * the coordinator has decided; the markers land on the partitions after that, and until then a
 * read_committed end offset (the last stable offset, what the admin's fetchTopicOffsets answers)
 * stays at the transaction's first record. `sent` is what the transaction's sends returned.
 */
export async function endTransaction(
  txn: Transaction,
  how: "commit" | "abort",
  sent: RecordMetadata[],
  kafka: Kafka = testKafka(),
): Promise<void> {
  if (how === "commit") await txn.commit();
  else await txn.abort();
  const first = new Map<string, Map<number, bigint>>();
  for (const m of sent) {
    const base = BigInt(m.baseOffset ?? "0");
    const byPartition = first.get(m.topicName) ?? new Map<number, bigint>();
    const had = byPartition.get(m.partition);
    if (had === undefined || base < had) byPartition.set(m.partition, base);
    first.set(m.topicName, byPartition);
  }
  const admin = kafka.admin();
  await admin.connect();
  try {
    const deadline = Date.now() + 30_000;
    for (const [topic, partitions] of first) {
      for (;;) {
        const ends = await admin.fetchTopicOffsets(topic);
        const stable = [...partitions].every(
          ([partition, base]) => BigInt(ends.find((e) => e.partition === partition)?.high ?? "0") > base,
        );
        if (stable) break;
        if (Date.now() > deadline)
          throw new Error(`the markers of a transaction on ${topic} did not land in 30 s`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } finally {
    await admin.disconnect();
  }
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
/**
 * The topic's read_committed end offsets (kafkajs's admin asks for the last stable offset) once they
 * have stopped moving: a transaction's EndTxn returns before the coordinator has written its commit
 * markers, so right after a writer committed, the last stable offset can still stand before that
 * transaction's records. Waits until three reads 200 ms apart agree, at most 15 s.
 */
async function settledEndOffsets(topic: string, kafka: Kafka) {
  const admin = kafka.admin();
  await admin.connect();
  try {
    let last = await admin.fetchTopicOffsets(topic);
    let agreeing = 1;
    const until = Date.now() + 15_000;
    while (agreeing < 3 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      const next = await admin.fetchTopicOffsets(topic);
      const same = next.every((o) => last.find((p) => p.partition === o.partition)?.high === o.high);
      agreeing = same ? agreeing + 1 : 1;
      last = next;
    }
    return last;
  } finally {
    await admin.disconnect();
  }
}

export async function committedRecords(topic: string, kafka: Kafka = testKafka()): Promise<KafkaMessage[]> {
  const offsets = await settledEndOffsets(topic, kafka);
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
