import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { PartitionLag, TopicLag } from "../events/sluice-events.js";

/** Weight of the newest throughput measurement in the moving average, 0 < α ≤ 1. */
export const THROUGHPUT_SMOOTHING = 0.5;

/**
 * Per-topic throughput and time to drain from successive lag readings. Throughput is the advance of
 * the group's position (committed offset; the log start before the first commit) per partition
 * between two readings, summed per topic over the partitions present in **both**, divided by the time
 * between them and smoothed exponentially (`THROUGHPUT_SMOOTHING`). Only common partitions count:
 * with ownedPartitionsOnly a partition joins or leaves the reading on every rebalance, and summing
 * committed offsets per topic would turn its whole offset into a one-sample throughput spike (and a
 * lost one into a stall). Time to drain = lag ÷ throughput: 0 with no lag, +Inf with lag and no progress.
 */
export class TopicThroughput {
  /** Group position per partition at the previous reading. */
  private prev: { atMs: number; byPartition: Map<string, bigint> } | undefined;
  private readonly smoothed = new Map<string, number>();

  /** Folds in a reading taken at `nowMs` and returns the topic totals, in order of first appearance. */
  update(partitions: readonly PartitionLag[], nowMs: number): TopicLag[] {
    const prev = this.prev;
    const byTopic = new Map<string, { lag: number; progressed: bigint; measured: boolean }>();
    const positions = new Map<string, bigint>();
    for (const p of partitions) {
      const t = byTopic.get(p.topic) ?? { lag: 0, progressed: 0n, measured: false };
      t.lag += p.lagRecords;
      // With no commit the group's position is the log start, i.e. end − lag.
      const position =
        p.committedOffset === null ? BigInt(p.endOffset) - BigInt(p.lagRecords) : BigInt(p.committedOffset);
      const k = topicPartitionKey(p.topic, p.partition);
      positions.set(k, position);
      const before = prev?.byPartition.get(k);
      if (before !== undefined) {
        t.measured = true;
        if (position > before) t.progressed += position - before;
      }
      byTopic.set(p.topic, t);
    }
    const out: TopicLag[] = [];
    for (const [topic, t] of byTopic) {
      if (prev && t.measured && nowMs > prev.atMs) {
        const rate = Number(t.progressed) / ((nowMs - prev.atMs) / 1000);
        const old = this.smoothed.get(topic);
        const a = THROUGHPUT_SMOOTHING;
        this.smoothed.set(topic, old === undefined ? rate : a * rate + (1 - a) * old);
      }
      const throughputRecordsPerSecond = this.smoothed.get(topic) ?? 0;
      const timeToDrainSeconds =
        t.lag === 0
          ? 0
          : throughputRecordsPerSecond > 0
            ? t.lag / throughputRecordsPerSecond
            : Number.POSITIVE_INFINITY;
      out.push({ topic, lagRecords: t.lag, throughputRecordsPerSecond, timeToDrainSeconds });
    }
    this.prev = { atMs: nowMs, byPartition: positions };
    return out;
  }
}
