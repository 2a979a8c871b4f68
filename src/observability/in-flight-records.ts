import { type OffsetOrder, offsetOrder } from "../contracts/offset-order.js";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { SluiceEvents } from "../events/sluice-events.js";

interface PartitionQueue {
  topic: string;
  partition: number;
  /** Order values of the offsets (contracts/offset-order.ts): numbers, bigints only past 2^53. */
  offsets: OffsetOrder[];
  timestamps: number[];
  /** Index of the oldest uncommitted entry; entries before it are dropped lazily (no Array.shift). */
  head: number;
}

/**
 * Per owned partition, the record timestamps this instance has consumed but not yet committed, fed by
 * `record.consumed` and `transaction.finished` events. It answers "what is the timestamp of the
 * first record at or after the committed offset" without any broker round trip, which is what
 * lag seconds needs; `LagMonitor` falls back to reading the log when it does not know (partition
 * owned elsewhere, or not fetched yet).
 */
export class InFlightRecords {
  private readonly queues = new Map<string, PartitionQueue>();
  /** The queue of the last record seen: records come in runs of one partition (a fetched batch). */
  private lastQueue: PartitionQueue | undefined;
  private readonly offs: Array<() => void>;

  constructor(events: SluiceEvents) {
    this.offs = [
      events.on("partitions.assigned", (e) => {
        for (const p of e.partitions) {
          if (!this.queues.has(topicPartitionKey(e.topic, p))) {
            this.queues.set(topicPartitionKey(e.topic, p), {
              topic: e.topic,
              partition: p,
              offsets: [],
              timestamps: [],
              head: 0,
            });
          }
        }
      }),
      events.on("partitions.revoked", (e) => {
        for (const p of e.partitions) this.queues.delete(topicPartitionKey(e.topic, p));
        this.lastQueue = undefined;
      }),
      events.on("record.consumed", (e) => {
        const q = this.queueOf(e.topic, e.partition);
        if (!q) return;
        const offset = offsetOrder(e.offset);
        if (q.head > 0 && q.head === q.offsets.length) {
          q.offsets.length = 0;
          q.timestamps.length = 0;
          q.head = 0;
        }
        const last = q.offsets[q.offsets.length - 1];
        if (last !== undefined && offset <= last) {
          // Re-fetched after an abort/seek: already tracked, or rewound past our head (start over).
          if (offset >= (q.offsets[q.head] as OffsetOrder)) return;
          q.offsets.length = 0;
          q.timestamps.length = 0;
          q.head = 0;
        }
        q.offsets.push(offset);
        q.timestamps.push(e.timestampMs);
      }),
      events.on("transaction.finished", (e) => {
        if (e.outcome !== "committed" || e.nextOffset === undefined) return;
        const q = this.queues.get(topicPartitionKey(e.topic, e.partition));
        if (q) this.dropBefore(q, offsetOrder(e.nextOffset));
      }),
    ];
  }

  /** The partition's queue, without building its key when it is the last record's partition. */
  private queueOf(topic: string, partition: number): PartitionQueue | undefined {
    const last = this.lastQueue;
    if (last !== undefined && last.partition === partition && last.topic === topic) return last;
    const q = this.queues.get(topicPartitionKey(topic, partition));
    this.lastQueue = q;
    return q;
  }

  /** Partitions this instance owns (per the last assignment events). */
  owned(): Array<{ topic: string; partition: number }> {
    return [...this.queues.values()].map((q) => ({ topic: q.topic, partition: q.partition }));
  }

  owns(topic: string, partition: number): boolean {
    return this.queues.has(topicPartitionKey(topic, partition));
  }

  /**
   * Timestamp of the first consumed record with offset ≥ `committedOffset`, if this instance owns the
   * partition and has fetched it; undefined otherwise (caller must look elsewhere).
   */
  firstUncommitted(topic: string, partition: number, committedOffset: bigint): number | undefined {
    const q = this.queues.get(topicPartitionKey(topic, partition));
    if (!q) return undefined;
    const at = offsetOrder(committedOffset.toString());
    this.dropBefore(q, at);
    const first = q.offsets[q.head];
    // A gap means the record at the committed offset was not consumed here (yet): do not guess.
    if (first === undefined || first > at) return undefined;
    return q.timestamps[q.head];
  }

  /** Records held across all partitions (for tests and diagnostics). */
  size(): number {
    let n = 0;
    for (const q of this.queues.values()) n += q.offsets.length - q.head;
    return n;
  }

  detach(): void {
    for (const off of this.offs.splice(0)) off();
  }

  private dropBefore(q: PartitionQueue, offset: OffsetOrder): void {
    while (q.head < q.offsets.length && (q.offsets[q.head] as OffsetOrder) < offset) q.head++;
    // Compact once the dead prefix dominates, so memory stays proportional to what is in flight.
    if (q.head > 1024 && q.head * 2 > q.offsets.length) {
      q.offsets.splice(0, q.head);
      q.timestamps.splice(0, q.head);
      q.head = 0;
    }
  }
}
