import { randomBytes } from "node:crypto";
import type { Kafka, KafkaMessage } from "kafkajs";
import type { PartitionRange } from "../../runs/offset-spec.js";
import { kafkaFailure } from "../client/kafka-failure.js";

export interface RangeMessage {
  partition: number;
  message: KafkaMessage;
}

/** Group-id prefix of batch mode's throwaway reader groups (needs a PREFIXED READ ACL). */
export const BATCH_GROUP_PREFIX = "sluice-batch-";

export interface KafkaRangeReaderOptions {
  kafka: Kafka;
  topic: string;
  ranges: readonly PartitionRange[];
  /** Records fetched ahead of the reader before fetching pauses. Default 5000. */
  maxBufferedRecords?: number;
  /** Consumer group id prefix; a random suffix keeps every read independent. Default "sluice-batch". */
  groupIdPrefix?: string;
}

/**
 * Reads fixed offset ranges of a topic with `read_committed`, partition by partition in offset order
 * (so row numbers are the same on every run), and stops at the end offsets given at construction even
 * if the topic keeps growing. Aborted transactional records and control records are skipped by kafkajs
 * but still advance the position, so ranges that end on them terminate.
 *
 * kafkajs has no manual partition assignment, so this joins a throwaway consumer group (never commits
 * offsets), pauses every partition but the current one and seeks it to its start. While the caller is
 * slow, the fetch handler waits and heartbeats instead of buffering without bound.
 */
export async function* readKafkaRanges(opts: KafkaRangeReaderOptions): AsyncGenerator<RangeMessage> {
  const maxBuffered = opts.maxBufferedRecords ?? 5000;
  const todo = opts.ranges
    .filter((r) => BigInt(r.endOffset) > BigInt(r.startOffset))
    .sort((a, b) => a.partition - b.partition);
  if (todo.length === 0) return;

  const topic = opts.topic;
  const groupPrefix = opts.groupIdPrefix ? `${opts.groupIdPrefix}-` : BATCH_GROUP_PREFIX;
  const groupId = `${groupPrefix}${randomBytes(6).toString("hex")}`;
  const consumer = opts.kafka.consumer({
    groupId,
    readUncommitted: false,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 250,
  });
  let index = 0;
  let next = BigInt(todo[0]!.startOffset);
  const buffer: RangeMessage[] = [];
  let finished = false;
  let failure: unknown = null;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };

  const current = () => todo[index]!;
  const others = (p: number) => todo.filter((r) => r.partition !== p).map((r) => r.partition);
  const focus = () => {
    const r = current();
    consumer.pause([{ topic, partitions: others(r.partition) }]);
    consumer.resume([{ topic, partitions: [r.partition] }]);
    consumer.seek({ topic, partition: r.partition, offset: next.toString() });
  };

  /** Records that everything up to `lastOffset` was seen; moves to the next partition at the range end. */
  const advance = (partition: number, lastOffset: string) => {
    if (finished || partition !== current().partition) return;
    const end = BigInt(current().endOffset);
    const candidate = BigInt(lastOffset) + 1n;
    if (candidate > next) next = candidate > end ? end : candidate;
    if (next >= end) {
      index++;
      if (index >= todo.length) finished = true;
      else {
        next = BigInt(current().startOffset);
        focus();
      }
    }
    notify();
  };

  try {
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    // After a rebalance kafkajs would restart from the (absent) committed offset: seek back to where we are.
    consumer.on(consumer.events.GROUP_JOIN, () => {
      if (!finished) focus();
    });
    // kafkajs never calls eachBatch for a fetch whose records were all filtered (aborted transactions,
    // control records); it resolves the offset itself and reports it only through this event.
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      const p = e.payload as { topic: string; partition: number; batchSize: number; lastOffset: string };
      if (p.topic === topic && p.batchSize === 0 && p.lastOffset !== undefined)
        advance(p.partition, p.lastOffset);
    });
    consumer.on(consumer.events.CRASH, (e) => {
      failure =
        kafkaFailure(e.payload.error, {
          doing: `reading ${topic}`,
          kafka: opts.kafka,
          access: [
            { operation: "READ", resourceType: "TOPIC", names: [topic] },
            {
              operation: "READ",
              resourceType: "GROUP",
              names: [groupPrefix],
              prefixed: true,
            },
          ],
        }) ?? e.payload.error;
      notify();
    });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, heartbeat, isRunning, isStale, resolveOffset }) => {
        if (finished || batch.topic !== topic) return;
        if (batch.partition !== current().partition) {
          // Partitions outside the ranges (or not yet due) would otherwise be refetched in a loop.
          consumer.pause([{ topic, partitions: [batch.partition] }]);
          return;
        }
        const end = BigInt(current().endOffset);
        for (const message of batch.messages) {
          const offset = BigInt(message.offset);
          if (offset < next || offset >= end) continue;
          buffer.push({ partition: batch.partition, message });
          next = offset + 1n;
        }
        // lastOffset() covers filtered aborted/control records, which still move the position. An empty
        // fetch says nothing about positions (its lastOffset is the high watermark), so it is skipped.
        const raw = batch as unknown as { isEmptyIncludingFiltered(): boolean };
        if (!raw.isEmptyIncludingFiltered()) {
          // Moves kafkajs's fetch position (never committed: autoCommit is off, the group is throwaway).
          resolveOffset(batch.lastOffset());
          advance(batch.partition, batch.lastOffset());
        }
        notify();
        while (buffer.length > maxBuffered && isRunning() && !isStale()) {
          await new Promise((r) => setTimeout(r, 50));
          await heartbeat();
        }
      },
    });
    focus();

    for (;;) {
      if (failure) throw failure;
      if (buffer.length > 0) {
        // Hand out everything buffered; splice keeps this O(n) instead of shift() per item.
        const chunk = buffer.splice(0, buffer.length);
        for (const m of chunk) yield m;
        continue;
      }
      if (finished) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
        // Re-check periodically: a crash or finish may race with setting `wake`.
        setTimeout(resolve, 200);
      });
    }
  } finally {
    finished = true;
    await consumer.disconnect().catch(() => {});
  }
}
