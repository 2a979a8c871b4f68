import { randomBytes } from "node:crypto";
import type { ConsumerConfig, Kafka, KafkaMessage } from "kafkajs";
import { topicPartitionKey } from "../../contracts/topic-partition.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";

/** One partition to read, from `fromOffset` on. */
export interface BoundedRange {
  topic: string;
  partition: number;
  /** First offset to read. */
  fromOffset: string;
  /** Read up to this offset, exclusive; absent: until `onBatch` says the range is done. */
  endOffset?: string;
}

export interface BoundedReadOptions<R extends BoundedRange> {
  kafka: Kafka;
  /** Prefix of the throwaway group's id; a random suffix keeps every read apart (a PREFIXED READ ACL). */
  groupIdPrefix: string;
  ranges: readonly R[];
  /**
   * `parallel`: every range at once (one fetch covers them all; probes, changelogs). `sequential`: one
   * range at a time in the given order, every other partition paused (rows in a deterministic order).
   */
  order: "parallel" | "sequential";
  /** What the read is for, for failure messages: "restoring dedup state from t". */
  doing: string;
  /** Stop waiting after this long, ms: the ranges not done by then come back as `unfinished`. */
  timeoutMs?: number;
  /** Ends the read early (a caller that stopped consuming); the ranges not done come back as `unfinished`. */
  signal?: AbortSignal;
  /** Consumer settings beyond the reader's own. */
  consumer?: Pick<ConsumerConfig, "maxBytesPerPartition" | "retry" | "sessionTimeout" | "heartbeatInterval">;
  /**
   * A fetched batch of `range`: its data records in `[fromOffset, endOffset)` in offset order
   * (read_committed: no markers, no aborted records; none when the batch held only those) and the last
   * offset the batch covered. It may wait (the reader heartbeats meanwhile, so the fetch waits instead
   * of buffering). Return `true` when the range needs nothing more.
   */
  onBatch(
    range: R,
    messages: readonly KafkaMessage[],
    lastOffset: bigint,
  ): boolean | undefined | Promise<boolean | undefined>;
}

export interface BoundedReadOutcome<R extends BoundedRange> {
  /** Ranges not done when the read stopped (timeout or abort); empty when every range was read. */
  unfinished: R[];
}

/** How often a waiting `onBatch` is interrupted for a group heartbeat, ms. */
const HEARTBEAT_WHILE_WAITING_MS = 1000;

interface RangeState<R> {
  range: R;
  /** Next offset to deliver. */
  next: bigint;
  end: bigint | undefined;
}

/**
 * The one loop that reads fixed offset ranges with `read_committed`: changelog restores, batch and
 * backfill topic ranges, run manifests and outcomes, record-timestamp probes and freshness reads.
 *
 * kafkajs has no manual assignment and no single-partition fetch (tulios/kafkajs#373), so the reader
 * joins a throwaway consumer group (it never commits offsets, so it leaves only an empty group that
 * the broker expires), and in the GROUP_JOIN handler (inside joinAndSync, before any fetch, and again
 * after a rejoin) seeks every range it reads to its position and pauses every other assigned
 * partition. A range is done when its position reaches `endOffset` or `onBatch` says so; it is paused
 * at once. Batches that held only transaction markers or aborted records never reach `eachBatch`:
 * kafkajs reports them through END_BATCH_PROCESS with `batchSize` 0, and they still move the range on,
 * so a range that ends in a commit marker terminates.
 *
 * Failure rules, the same for every reader: a consumer crash ends the read at once with its
 * classified error (`kafkaFailure`, naming the topic and group accesses); a timeout or an abort ends
 * it with the unfinished ranges, and the caller says what that means (a restore fails, a probe reports
 * what it saw).
 */
export async function readBounded<R extends BoundedRange>(
  opts: BoundedReadOptions<R>,
): Promise<BoundedReadOutcome<R>> {
  const states: RangeState<R>[] = opts.ranges
    .map((range) => ({
      range,
      next: BigInt(range.fromOffset),
      end: range.endOffset === undefined ? undefined : BigInt(range.endOffset),
    }))
    .filter((s) => s.end === undefined || s.end > s.next);
  if (states.length === 0) return { unfinished: [] };
  const pending = new Map(states.map((s) => [topicPartitionKey(s.range.topic, s.range.partition), s]));
  const queue = [...states];
  const topics = [...new Set(states.map((s) => s.range.topic))];

  const consumer = opts.kafka.consumer({
    groupId: `${opts.groupIdPrefix}${randomBytes(6).toString("hex")}`,
    readUncommitted: false,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 250,
    ...opts.consumer,
  });
  const access: KafkaAccess[] = [
    { operation: "READ", resourceType: "TOPIC", names: topics },
    { operation: "READ", resourceType: "GROUP", names: [opts.groupIdPrefix], prefixed: true },
  ];
  let stop: (error?: unknown) => void = () => {};
  const stopped = new Promise<void>((resolve, reject) => {
    stop = (error) => (error === undefined ? resolve() : reject(error));
  });
  // Marked handled: a crash can end the read before anything awaits it.
  stopped.catch(() => {});
  const classify = (error: unknown) =>
    kafkaFailure(error, { doing: opts.doing, kafka: opts.kafka, access }) ?? error;
  const fail = (error: unknown) => stop(classify(error));

  /** The ranges being read now: all pending ones, or the head of the queue when sequential. */
  const active = (): RangeState<R>[] =>
    opts.order === "parallel" ? [...pending.values()] : queue.slice(0, 1);
  const isActive = (s: RangeState<R> | undefined): s is RangeState<R> =>
    s !== undefined && (opts.order === "parallel" || queue[0] === s);
  const seek = (s: RangeState<R>) =>
    consumer.seek({ topic: s.range.topic, partition: s.range.partition, offset: s.next.toString() });

  const finish = (s: RangeState<R>) => {
    pending.delete(topicPartitionKey(s.range.topic, s.range.partition));
    consumer.pause([{ topic: s.range.topic, partitions: [s.range.partition] }]);
    if (queue[0] === s) {
      queue.shift();
      const head = queue[0];
      if (opts.order === "sequential" && head) {
        consumer.resume([{ topic: head.range.topic, partitions: [head.range.partition] }]);
        seek(head);
      }
    } else queue.splice(queue.indexOf(s), 1);
    if (pending.size === 0) stop();
  };

  const deliver = async (s: RangeState<R>, messages: readonly KafkaMessage[], lastOffset: bigint) => {
    const inRange = messages.filter((m) => {
      const o = BigInt(m.offset);
      return o >= s.next && (s.end === undefined || o < s.end);
    });
    if (lastOffset + 1n > s.next)
      s.next = s.end !== undefined && lastOffset + 1n > s.end ? s.end : lastOffset + 1n;
    const done = await opts.onBatch(s.range, inRange, lastOffset);
    if (
      pending.has(topicPartitionKey(s.range.topic, s.range.partition)) &&
      (done || (s.end !== undefined && s.next >= s.end))
    )
      finish(s);
  };

  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const reading = new Set(active().map((s) => topicPartitionKey(s.range.topic, s.range.partition)));
    for (const [topic, partitions] of Object.entries(payload.memberAssignment as Record<string, number[]>)) {
      const idle = partitions.filter((p) => !reading.has(topicPartitionKey(topic, p)));
      if (idle.length > 0) consumer.pause([{ topic, partitions: idle }]);
    }
    for (const s of active()) seek(s);
  });
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    if (payload.batchSize !== 0 || payload.lastOffset === undefined) return;
    const s = pending.get(topicPartitionKey(payload.topic, payload.partition));
    if (isActive(s)) deliver(s, [], BigInt(payload.lastOffset)).catch(fail);
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => fail(payload.error));

  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => stop(), opts.timeoutMs);
  const onAbort = () => stop();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  if (opts.signal?.aborted) stop();
  try {
    await consumer.connect();
    await consumer.subscribe({ topics, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, heartbeat }) => {
        const s = pending.get(topicPartitionKey(batch.topic, batch.partition));
        if (!isActive(s)) {
          // Not (or no longer, or not yet) read: it would otherwise be fetched again and again.
          consumer.pause([{ topic: batch.topic, partitions: [batch.partition] }]);
          return;
        }
        const delivered = deliver(s, batch.messages, BigInt(batch.lastOffset()));
        while (await isPending(delivered, HEARTBEAT_WHILE_WAITING_MS)) await heartbeat();
        await delivered;
      },
    });
    await stopped;
  } catch (error) {
    throw classify(error);
  } finally {
    if (timer) clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    await consumer.disconnect().catch(() => {});
  }
  return { unfinished: [...pending.values()].map((s) => s.range) };
}

/** Whether `p` is still pending after `ms` (it may settle later). */
async function isPending(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<true>((resolve) => {
    timer = setTimeout(() => resolve(true), ms);
  });
  try {
    return await Promise.race([
      p.then(
        () => false as const,
        () => false as const,
      ),
      waited,
    ]);
  } finally {
    clearTimeout(timer);
  }
}
