import type { Kafka } from "kafkajs";
import { MODEL_BOUNDARY_KEY } from "../../contracts/model-control.js";
import { isDedupSegmentKey } from "../../delivery/dedup-segment.js";
import { OFFSET_CHECKPOINT_KEY } from "../../delivery/transaction-records.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";
import { readBounded } from "./bounded-reader.js";

/** The latest value per key of one changelog partition (compaction applied in memory). */
export interface ChangelogRecord {
  /** The request id (UTF-8); for a dedup segment (`segment: true`) its record key as latin1. */
  key: string;
  value: Buffer;
  timestampMs: number;
  segment?: boolean;
}

/** What one changelog partition holds: dedup entries and the input offset committed with them. */
export interface RestoredPartition {
  /** Per-id records and dedup segments (src/delivery/dedup-segment.ts), in the order they were written. */
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
    const latest = new Map<number, LatestRecords>();
    const checkpoints = new Map<number, string>();
    const boundaries = new Map<number, Buffer>();
    for (const p of wanted) latest.set(p, { ids: new Map(), segments: new Map(), order: 0 });
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
        const store = latest.get(range.partition) as LatestRecords;
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
          const segment = isDedupSegmentKey(m.key);
          const key = m.key.toString(segment ? "latin1" : "utf8");
          const records = segment ? store.segments : store.ids;
          // Delete first so a re-remembered id moves to the end: the restored order is then
          // last-remembered order, which the Deduplicator's size bound evicts from the front.
          records.delete(key);
          if (m.value !== null)
            records.set(key, {
              key,
              value: m.value,
              timestampMs: Number(m.timestamp),
              ...(segment ? { segment } : {}),
              order: store.order++,
            });
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

/** One partition's latest records: per-id records and segments, each map in last-written order. */
interface LatestRecords {
  ids: Map<string, ChangelogRecord & { order: number }>;
  segments: Map<string, ChangelogRecord & { order: number }>;
  order: number;
}

/** Both kinds of records in the order they were last written. */
function inWrittenOrder(store: LatestRecords): ChangelogRecord[] {
  const ids = [...store.ids.values()];
  const segments = [...store.segments.values()];
  if (segments.length === 0) return ids;
  if (ids.length === 0) return segments;
  const out: ChangelogRecord[] = [];
  let i = 0;
  let j = 0;
  while (i < ids.length || j < segments.length) {
    const a = ids[i];
    const b = segments[j];
    if (b === undefined || (a !== undefined && a.order < b.order)) {
      out.push(a as ChangelogRecord);
      i++;
    } else {
      out.push(b);
      j++;
    }
  }
  return out;
}

function toResult(
  latest: Map<number, LatestRecords>,
  checkpoints: Map<number, string>,
  boundaries: Map<number, Buffer>,
): Map<number, RestoredPartition> {
  const out = new Map<number, RestoredPartition>();
  for (const [p, store] of latest)
    out.set(p, {
      entries: inWrittenOrder(store),
      nextOffset: checkpoints.get(p),
      ...(boundaries.has(p) ? { modelBoundary: boundaries.get(p) } : {}),
    });
  return out;
}
