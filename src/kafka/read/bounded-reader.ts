import { setTimeout as sleep } from "node:timers/promises";
import type { Kafka, KafkaMessage } from "kafkajs";
import { topicPartitionKey } from "../../contracts/topic-partition.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";
import {
  committedRecords,
  type KafkajsCluster,
  kafkajsCluster,
  READ_COMMITTED,
} from "../protocol/kafkajs-cluster.js";

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
  ranges: readonly R[];
  /**
   * `parallel`: every range at once (one fetch per leader covers them all; probes, changelogs).
   * `sequential`: one range at a time in the given order (rows in a deterministic order).
   */
  order: "parallel" | "sequential";
  /** What the read is for, for failure messages: "restoring dedup state from t". */
  doing: string;
  /** Stop waiting after this long, ms: the ranges not done by then come back as `unfinished`. */
  timeoutMs?: number;
  /** Ends the read early (a caller that stopped consuming); the ranges not done come back as `unfinished`. */
  signal?: AbortSignal;
  /** Bytes one fetch returns per partition at most. Default 1 MiB (kafkajs's consumer default). */
  maxBytesPerPartition?: number;
  /** Failed fetches in a row (broker moving, metadata stale) before the read fails. Default 5. */
  retries?: number;
  /**
   * A fetched batch of `range`: its data records in `[fromOffset, endOffset)` in offset order
   * (read_committed: no markers, no aborted records; none when the batch held only those) and the last
   * offset the batch covered. It may wait: the next fetch waits for it (nothing is buffered, and no
   * group session has to be kept alive). Return `true` when the range needs nothing more.
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

/** How long the broker may hold a fetch that has nothing to return yet, ms. */
const FETCH_MAX_WAIT_MS = 250;
/** kafkajs's consumer defaults: bytes per fetch response, and per partition in it. */
const FETCH_MAX_BYTES = 10 * 1024 * 1024;
const DEFAULT_MAX_BYTES_PER_PARTITION = 1024 * 1024;
/** First back-off after a failed fetch, ms; doubled per failure in a row. */
const RETRY_BACKOFF_MS = 100;

interface RangeState<R> {
  range: R;
  /** Next offset to deliver (and to fetch). */
  next: bigint;
  end: bigint | undefined;
}

/** One partition's part of a fetch: what it was fetched from, its committed records, how far it got. */
interface Fetched<R> {
  state: RangeState<R>;
  fetchedFrom: bigint;
  messages: KafkaMessage[];
  /** The last offset the fetch covered (data, aborted data or a marker); undefined when it held none. */
  lastOffset: bigint | undefined;
}

/**
 * The one loop that reads fixed offset ranges with `read_committed`: changelog restores, batch and
 * backfill topic ranges, run manifests and outcomes, model decisions, record-timestamp probes and
 * freshness reads.
 *
 * It reads without a consumer group, as the Java client's `assign()` does: kafkajs has no manual
 * assignment (tulios/kafkajs#373), so the reader fetches through kafkajs's own Cluster and Broker
 * (kafkajs-cluster.ts): one Fetch request per partition leader with every range being read, at its
 * own position, `read_committed`. No group is joined, so a read needs only READ on its topics, costs
 * no JoinGroup/SyncGroup round trips (nor the broker's `group.initial.rebalance.delay.ms`, 3 s by
 * default, which delays the first join of every new group), and leaves nothing behind in
 * `__consumer_offsets` (docs/design.md, "Reading a fixed range needs no group").
 *
 * Records come out through kafkajs's own batch filter with Sluice's read_committed correction
 * (aborted-transaction-order.ts): no markers, no aborted records. The position moves past every
 * record batch the fetch returned (to its last offset, as the Java client's fetcher does), so a range
 * that ends in a commit marker or in aborted data terminates. A range is done when its position
 * reaches `endOffset` or `onBatch` says so.
 *
 * Failure rules, the same for every reader: a retriable failure (a leader moving, stale metadata, a
 * lost connection) refreshes the metadata and fetches again, up to `retries` in a row; a position
 * below the log start (retention removed the records) moves to the log start, as a consumer reading
 * from the beginning would; any other failure ends the read at once with its classified error
 * (`kafkaFailure`, naming the topic access). A timeout or an abort ends it with the unfinished
 * ranges, and the caller says what that means (a restore fails, a probe reports what it saw).
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
  const access: KafkaAccess[] = [{ operation: "READ", resourceType: "TOPIC", names: topics }];
  const classify = (error: unknown) =>
    kafkaFailure(error, { doing: opts.doing, kafka: opts.kafka, access }) ?? error;

  let stopping = false;
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    stop = () => {
      stopping = true;
      resolve();
    };
  });

  /** The ranges being read now: all pending ones, or the head of the queue when sequential. */
  const active = (): RangeState<R>[] =>
    opts.order === "parallel" ? [...pending.values()] : queue.slice(0, 1);

  const finish = (s: RangeState<R>) => {
    pending.delete(topicPartitionKey(s.range.topic, s.range.partition));
    queue.splice(queue.indexOf(s), 1);
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

  const cluster = kafkajsCluster(opts.kafka);
  const maxBytesPerPartition = opts.maxBytesPerPartition ?? DEFAULT_MAX_BYTES_PER_PARTITION;
  const retries = opts.retries ?? 5;

  const read = async () => {
    await cluster.connect();
    await cluster.addMultipleTargetTopics(topics);
    let failures = 0;
    while (!stopping && pending.size > 0) {
      let fetched: Fetched<R>[];
      try {
        fetched = await fetchOnce(cluster, active(), maxBytesPerPartition);
        failures = 0;
      } catch (error) {
        if (stopping) return;
        if (await movedToLogStart(cluster, pending, error)) continue;
        if (!isRetriable(error) || failures >= retries) throw error;
        await sleep(RETRY_BACKOFF_MS * 2 ** failures);
        failures += 1;
        await cluster.refreshMetadata().catch(() => undefined);
        continue;
      }
      for (const f of fetched) {
        if (stopping) return;
        // Only a range still read from the position it was fetched at (a sequential read moves on).
        if (!pending.has(topicPartitionKey(f.state.range.topic, f.state.range.partition))) continue;
        if (f.state.next !== f.fetchedFrom || f.lastOffset === undefined) continue;
        await deliver(f.state, f.messages, f.lastOffset);
      }
    }
  };

  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(stop, opts.timeoutMs);
  opts.signal?.addEventListener("abort", stop, { once: true });
  if (opts.signal?.aborted) stop();
  const reading = stopping ? Promise.resolve() : read();
  // A read that ends after the timeout or abort (an onBatch still waiting) has nothing left to say.
  reading.catch(() => {});
  try {
    await Promise.race([reading, stopped]);
  } catch (error) {
    throw classify(error);
  } finally {
    stop();
    if (timer) clearTimeout(timer);
    opts.signal?.removeEventListener("abort", stop);
    await cluster.disconnect().catch(() => {});
  }
  return { unfinished: [...pending.values()].map((s) => s.range) };
}

/** One Fetch request per leader for `reading`, all at once; each partition's part of the answers. */
async function fetchOnce<R extends BoundedRange>(
  cluster: KafkajsCluster,
  reading: readonly RangeState<R>[],
  maxBytesPerPartition: number,
): Promise<Fetched<R>[]> {
  const byLeader = new Map<string, RangeState<R>[]>();
  for (const s of reading) {
    const { topic, partition } = s.range;
    const leader = Object.keys(cluster.findLeaderForPartitions(topic, [partition]))[0];
    if (leader === undefined)
      throw Object.assign(new Error(`No leader known for partition ${partition} of ${topic}`), {
        retriable: true,
        type: "LEADER_NOT_AVAILABLE",
      });
    const group = byLeader.get(leader);
    if (group) group.push(s);
    else byLeader.set(leader, [s]);
  }
  const answers = await Promise.all(
    [...byLeader].map(async ([nodeId, group]) => {
      // Each range with the position it is fetched from (the state's own may move while we wait).
      const asked = new Map(
        group.map((s) => [topicPartitionKey(s.range.topic, s.range.partition), { state: s, from: s.next }]),
      );
      const byTopic = new Map<string, { partition: number; fetchOffset: string; maxBytes: number }[]>();
      for (const { state, from } of asked.values()) {
        const partitions = byTopic.get(state.range.topic) ?? [];
        partitions.push({
          partition: state.range.partition,
          fetchOffset: from.toString(),
          maxBytes: maxBytesPerPartition,
        });
        byTopic.set(state.range.topic, partitions);
      }
      const broker = await cluster.findBroker({ nodeId });
      const { responses } = await broker.fetch({
        isolationLevel: READ_COMMITTED,
        maxWaitTime: FETCH_MAX_WAIT_MS,
        minBytes: 1,
        maxBytes: FETCH_MAX_BYTES,
        topics: [...byTopic].map(([topic, partitions]) => ({ topic, partitions })),
      });
      const fetched: Fetched<R>[] = [];
      for (const { topicName, partitions } of responses) {
        for (const data of partitions) {
          const range = asked.get(topicPartitionKey(topicName, data.partition));
          if (range === undefined) continue;
          fetched.push({
            state: range.state,
            fetchedFrom: range.from,
            messages: committedRecords(topicName, range.from.toString(), data),
            lastOffset: lastFetchedOffset(data.messages, range.from),
          });
        }
      }
      return fetched;
    }),
  );
  return answers.flat();
}

/**
 * The last offset the fetched record batches cover (markers and aborted records included), or
 * undefined when nothing at or after `from` came back. A batch counts to its last offset, as in the
 * Java client, so records compacted away at a batch's end do not hold the position back.
 */
function lastFetchedOffset(messages: readonly KafkaMessage[], from: bigint): bigint | undefined {
  let last: bigint | undefined;
  for (const m of messages) {
    const context = (m as { batchContext?: { firstOffset?: string; lastOffsetDelta?: number } }).batchContext;
    const end =
      context?.firstOffset !== undefined && context.lastOffsetDelta !== undefined
        ? BigInt(context.firstOffset) + BigInt(context.lastOffsetDelta)
        : BigInt(m.offset);
    if (end >= from && (last === undefined || end > last)) last = end;
  }
  return last;
}

/**
 * After OFFSET_OUT_OF_RANGE below the log start (retention removed the records), the range moves to
 * the log start and the read goes on; true when it did. A position past the log end stays an error.
 */
async function movedToLogStart<R extends BoundedRange>(
  cluster: KafkajsCluster,
  pending: ReadonlyMap<string, RangeState<R>>,
  error: unknown,
): Promise<boolean> {
  const e = error as { name?: string; topic?: string; partition?: number };
  if (e.name !== "KafkaJSOffsetOutOfRange" || e.topic === undefined || e.partition === undefined)
    return false;
  const s = pending.get(topicPartitionKey(e.topic, e.partition));
  if (s === undefined) return false;
  const [earliest] = await cluster.fetchTopicsOffset([
    { topic: e.topic, fromBeginning: true, partitions: [{ partition: e.partition }] },
  ]);
  const start = earliest?.partitions.find((p) => p.partition === e.partition)?.offset;
  if (start === undefined || BigInt(start) <= s.next) return false;
  s.next = s.end !== undefined && BigInt(start) > s.end ? s.end : BigInt(start);
  return true;
}

function isRetriable(error: unknown): boolean {
  const e = error as { retriable?: boolean; name?: string };
  return (
    e?.retriable === true ||
    e?.name === "KafkaJSBrokerNotFound" ||
    e?.name === "KafkaJSConnectionClosedError" ||
    e?.name === "KafkaJSTopicMetadataNotLoaded"
  );
}
