import type { Kafka } from "kafkajs";
import { MODEL_BOUNDARY_KEY } from "../../contracts/model-control.js";
import { OFFSET_CHECKPOINT_KEY } from "../../delivery/partition-committer.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";

/** Group-id prefix of the throwaway consumer groups that read changelogs (needs a PREFIXED READ ACL). */
export const RESTORE_GROUP_PREFIX = "sluice-restore-";

/** The latest value per key of one changelog partition (compaction applied in memory). */
export interface ChangelogRecord {
  key: string;
  value: Buffer;
  timestampMs: number;
}

/** What one changelog partition holds: dedup entries and the input offset committed with them. */
export interface RestoredPartition {
  entries: ChangelogRecord[];
  /** Next input offset recorded by the last committed transaction; undefined when none was. */
  nextOffset: string | undefined;
  /** The partition's last model switch boundary (src/contracts/model-control.ts), raw; undefined when none. */
  modelBoundary?: Buffer | undefined;
}

export interface ChangelogReaderOptions {
  kafka: Kafka;
  /** Give up (retriable error) when a read takes longer than this, ms. */
  timeoutMs: number;
}

/**
 * Reads changelog partitions from the beginning to their current end with `read_committed`
 * isolation, so aborted writes of a fenced owner are never restored.
 *
 * Precondition: the caller already initialised the transactional producer that owns these
 * partitions. That aborts any open transaction of a previous owner, so the end offset read here is
 * stable and nothing committed later by that owner can exist (it is fenced).
 *
 * kafkajs has no manual partition assignment, so a short-lived consumer in a throwaway group reads
 * the topic and pauses the partitions it was not asked for.
 *
 * Requires `fixAbortedTransactionOrder()` (aborted-transaction-order.ts) to be applied in the
 * process (`createKafka` does), or aborted writes of fenced owners can come back.
 */
export class ChangelogReader {
  private readonly kafka: Kafka;
  private readonly timeoutMs: number;

  constructor(opts: ChangelogReaderOptions) {
    this.kafka = opts.kafka;
    this.timeoutMs = opts.timeoutMs;
  }

  /** Latest record per key, and the offset checkpoint, for each requested partition of `topic`. */
  async read(topic: string, partitions: readonly number[]): Promise<Map<number, RestoredPartition>> {
    const wanted = new Set(partitions);
    const latest = new Map<number, Map<string, ChangelogRecord>>();
    const checkpoints = new Map<number, string>();
    const boundaries = new Map<number, Buffer>();
    for (const p of wanted) latest.set(p, new Map());
    if (wanted.size === 0) return new Map();

    const access: KafkaAccess[] = [
      { operation: "READ", resourceType: "TOPIC", names: [topic] },
      { operation: "READ", resourceType: "GROUP", names: [RESTORE_GROUP_PREFIX], prefixed: true },
    ];
    const failure = (error: unknown) =>
      kafkaFailure(error, { doing: `restoring dedup state from ${topic}`, kafka: this.kafka, access }) ??
      error;
    const admin = this.kafka.admin();
    let ends: Map<number, bigint>;
    try {
      await admin.connect();
      const offsets = await admin.fetchTopicOffsets(topic);
      ends = new Map();
      for (const o of offsets) {
        if (wanted.has(o.partition) && BigInt(o.high) > BigInt(o.low)) ends.set(o.partition, BigInt(o.high));
      }
    } catch (error) {
      throw failure(error);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    if (ends.size === 0) return toResult(latest, checkpoints, boundaries);

    const consumer = this.kafka.consumer({
      groupId: `${RESTORE_GROUP_PREFIX}${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      sessionTimeout: 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 200,
    });
    const remaining = new Set(ends.keys());
    let finish: (() => void) | undefined;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const advance = (partition: number, lastOffset: string): void => {
      const end = ends.get(partition);
      if (end !== undefined && BigInt(lastOffset) + 1n >= end) {
        remaining.delete(partition);
        if (remaining.size === 0) finish?.();
      }
    };
    // END_BATCH_PROCESS also fires for batches that are empty after filtering (only markers or
    // aborted records), which is how a partition ending in a commit marker is seen to be done.
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      if (e.payload.topic === topic) advance(e.payload.partition, e.payload.lastOffset);
    });
    // A crash the consumer does not recover from (a refused group, say) ends the read at once instead
    // of after timeoutMs.
    let crashed: ((error: unknown) => void) | undefined;
    const crash = new Promise<never>((_, reject) => {
      crashed = reject;
    });
    crash.catch(() => undefined);
    consumer.on(consumer.events.CRASH, (e) => {
      if (!e.payload.restart) crashed?.(e.payload.error);
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch, pause }) => {
          if (!remaining.has(batch.partition)) {
            if (!ends.has(batch.partition)) pause();
            return;
          }
          const store = latest.get(batch.partition) as Map<string, ChangelogRecord>;
          const end = ends.get(batch.partition) as bigint;
          for (const m of batch.messages) {
            if (BigInt(m.offset) >= end) break;
            if (m.key === null) continue;
            if (m.key.equals(OFFSET_CHECKPOINT_KEY)) {
              if (m.value !== null && /^\d{1,19}$/.test(m.value.toString("utf8"))) {
                checkpoints.set(batch.partition, m.value.toString("utf8"));
              }
              continue;
            }
            if (m.key.equals(MODEL_BOUNDARY_KEY)) {
              if (m.value !== null) boundaries.set(batch.partition, m.value);
              continue;
            }
            const key = m.key.toString("utf8");
            // Delete first so a re-remembered id moves to the end: the restored order is then
            // last-remembered order, which the Deduplicator's size bound evicts from the front.
            store.delete(key);
            if (m.value !== null) store.set(key, { key, value: m.value, timestampMs: Number(m.timestamp) });
          }
        },
      });
      await Promise.race([
        finished,
        crash,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new SluiceError(
                  "TRANSACTION_FAILED",
                  `changelog restore of ${topic} partitions [${[...remaining].join(",")}] did not reach the end within ${this.timeoutMs} ms; check the broker and that no foreign producer writes the changelog`,
                  { retriable: true, context: { topic } },
                ),
              ),
            this.timeoutMs,
          );
        }),
      ]);
    } catch (error) {
      throw failure(error);
    } finally {
      if (timer) clearTimeout(timer);
      await consumer.disconnect().catch(() => undefined);
    }
    return toResult(latest, checkpoints, boundaries);
  }
}

function toResult(
  latest: Map<number, Map<string, ChangelogRecord>>,
  checkpoints: Map<number, string>,
  boundaries: Map<number, Buffer>,
): Map<number, RestoredPartition> {
  const out = new Map<number, RestoredPartition>();
  for (const [p, store] of latest)
    out.set(p, {
      entries: [...store.values()],
      nextOffset: checkpoints.get(p),
      ...(boundaries.has(p) ? { modelBoundary: boundaries.get(p) } : {}),
    });
  return out;
}
