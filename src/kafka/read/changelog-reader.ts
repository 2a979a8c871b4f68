import type { Kafka } from "kafkajs";
import { MODEL_BOUNDARY_KEY } from "../../contracts/model-control.js";
import { OFFSET_CHECKPOINT_KEY } from "../../delivery/transaction-records.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";
import { readBounded } from "./bounded-reader.js";

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
 * The read is one `readBounded` (bounded-reader.ts) over every requested partition, from its log start
 * to the end offset read first.
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

    const access: KafkaAccess[] = [{ operation: "READ", resourceType: "TOPIC", names: [topic] }];
    const failure = (error: unknown) =>
      kafkaFailure(error, { doing: `restoring dedup state from ${topic}`, kafka: this.kafka, access }) ??
      error;
    const admin = this.kafka.admin();
    let ends: Map<number, bigint>;
    const lows = new Map<number, string>();
    try {
      await admin.connect();
      const offsets = await admin.fetchTopicOffsets(topic);
      ends = new Map();
      for (const o of offsets) {
        if (wanted.has(o.partition) && BigInt(o.high) > BigInt(o.low)) {
          ends.set(o.partition, BigInt(o.high));
          lows.set(o.partition, o.low);
        }
      }
    } catch (error) {
      throw failure(error);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    if (ends.size === 0) return toResult(latest, checkpoints, boundaries);

    const { unfinished } = await readBounded({
      kafka: this.kafka,
      ranges: [...ends].map(([partition, end]) => ({
        topic,
        partition,
        fromOffset: lows.get(partition) as string,
        endOffset: end.toString(),
      })),
      order: "parallel",
      doing: `restoring dedup state from ${topic}`,
      timeoutMs: this.timeoutMs,
      onBatch: (range, messages) => {
        const store = latest.get(range.partition) as Map<string, ChangelogRecord>;
        for (const m of messages) {
          if (m.key === null) continue;
          if (m.key.equals(OFFSET_CHECKPOINT_KEY)) {
            if (m.value !== null && /^\d{1,19}$/.test(m.value.toString("utf8"))) {
              checkpoints.set(range.partition, m.value.toString("utf8"));
            }
            continue;
          }
          if (m.key.equals(MODEL_BOUNDARY_KEY)) {
            if (m.value !== null) boundaries.set(range.partition, m.value);
            continue;
          }
          const key = m.key.toString("utf8");
          // Delete first so a re-remembered id moves to the end: the restored order is then
          // last-remembered order, which the Deduplicator's size bound evicts from the front.
          store.delete(key);
          if (m.value !== null) store.set(key, { key, value: m.value, timestampMs: Number(m.timestamp) });
        }
        return undefined;
      },
    });
    if (unfinished.length > 0)
      throw new SluiceError(
        "TRANSACTION_FAILED",
        `changelog restore of ${topic} partitions [${unfinished.map((r) => r.partition).join(",")}] did not reach the end within ${this.timeoutMs} ms; check the broker and that no foreign producer writes the changelog`,
        { retriable: true, context: { topic } },
      );
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
