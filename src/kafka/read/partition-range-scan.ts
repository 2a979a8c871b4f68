import { randomBytes } from "node:crypto";
import type { ConsumerConfig, Kafka, KafkaMessage } from "kafkajs";
import { topicPartitionKey } from "../../contracts/topic-partition.js";

/** One partition to read from `fromOffset` on, and what to do with what arrives. */
export interface RangeReader {
  topic: string;
  partition: number;
  fromOffset: string;
  /**
   * A fetched batch of this partition: its data records (read_committed: no markers, no aborted
   * records; possibly none, when the batch held only those) and the last offset it covered. Return
   * `true` when this partition needs nothing more.
   */
  onBatch(messages: readonly KafkaMessage[], lastOffset: bigint): boolean;
}

export interface PartitionRangeScanOptions {
  /** Prefix of the throwaway group's id (its ACL is a PREFIXED READ on it). */
  groupIdPrefix: string;
  readers: readonly RangeReader[];
  /** Stop waiting after this long, ms; what was read by then stays read. */
  timeoutMs: number;
  /** Consumer settings beyond the scan's own (fetch size, retries). */
  consumer?: Pick<ConsumerConfig, "maxBytesPerPartition" | "retry">;
}

/**
 * Reads chosen partitions from chosen offsets until each reader says it is done, or the timeout.
 *
 * kafkajs has no manual assignment and no single-partition fetch (tulios/kafkajs#373), so the scan
 * joins a throwaway consumer group (no offsets are ever committed, so it leaves nothing behind but an
 * empty group the broker expires), seeks every reader's partition to its start from the GROUP_JOIN
 * handler — inside joinAndSync, before the first fetch, so no fetch from the default position can race
 * the seek — and pauses every other assigned partition, and each reader's as soon as it is done.
 * Batches holding only transaction markers or aborted records never reach `eachBatch`; they arrive
 * through the START_BATCH_PROCESS instrumentation event and still move their reader on. kafkajs
 * errors are thrown as they are: the caller classifies them (`kafkaFailure`) with the accesses it needs.
 * Used by `KafkaRecordTimestampReader` and the client's `readFreshness`.
 */
export async function scanPartitionRanges(kafka: Kafka, opts: PartitionRangeScanOptions): Promise<void> {
  const pending = new Map<string, RangeReader>();
  for (const r of opts.readers) pending.set(topicPartitionKey(r.topic, r.partition), r);
  if (pending.size === 0) return;
  const consumer = kafka.consumer({
    groupId: `${opts.groupIdPrefix}${randomBytes(6).toString("hex")}`,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 250,
    ...opts.consumer,
  });
  let settle: () => void = () => {};
  const allDone = new Promise<void>((resolve) => {
    settle = resolve;
  });
  const deliver = (
    topic: string,
    partition: number,
    messages: readonly KafkaMessage[],
    lastOffset: bigint,
  ) => {
    const key = topicPartitionKey(topic, partition);
    const reader = pending.get(key);
    if (!reader?.onBatch(messages, lastOffset)) return;
    pending.delete(key);
    consumer.pause([{ topic, partitions: [partition] }]);
    if (pending.size === 0) settle();
  };

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const assignment = payload.memberAssignment as Record<string, number[]>;
    for (const [topic, partitions] of Object.entries(assignment)) {
      const idle = partitions.filter((p) => !pending.has(topicPartitionKey(topic, p)));
      if (idle.length > 0) consumer.pause([{ topic, partitions: idle }]);
    }
    for (const r of pending.values())
      consumer.seek({ topic: r.topic, partition: r.partition, offset: r.fromOffset });
  });
  consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => {
    // Batches with no deliverable message (markers, aborted data) never reach eachBatch.
    if (payload.batchSize === 0) deliver(payload.topic, payload.partition, [], BigInt(payload.lastOffset));
  });

  const timer = setTimeout(settle, opts.timeoutMs);
  try {
    await consumer.connect();
    await consumer.subscribe({
      topics: [...new Set(opts.readers.map((r) => r.topic))],
      fromBeginning: false,
    });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) =>
        deliver(batch.topic, batch.partition, batch.messages, BigInt(batch.lastOffset())),
    });
    await allDone;
  } finally {
    clearTimeout(timer);
    await consumer.disconnect().catch(() => {});
  }
}
