import { dedupSegmentKey, encodeDedupSegments, type RememberedId } from "./dedup-segment.js";
import type { ChangelogTombstone, Deduplicator } from "./deduplicator.js";
import type { OutboundMessage, RecordCompletion } from "./outbound-message.js";

/** What one transaction writes to its partition's dedup changelog, and what to do after it. */
export interface PreparedChangelog {
  /** Segments of the ids its records remembered, then due tombstones. */
  records: OutboundMessage[];
  /** The transaction committed: its segments now hold those ids (`Deduplicator.assignSegment`). */
  committed(): void;
  /** It did not commit: its tombstones are queued again (its segments were never visible). */
  aborted(): void;
}

export interface DedupChangelogOptions {
  /** The changelog topic and partition of the committer's input partition. */
  topic: string;
  partition: number;
  /** The partition's deduplicator now (undefined before its restore finished). */
  dedup: () => Deduplicator | undefined;
  /** Clock for expiries, epoch ms. */
  now: () => number;
}

/**
 * The dedup changelog records of one input partition's transactions: the ids its completions
 * remembered, as dedup segments (src/delivery/dedup-segment.ts: one record for up to 16 KiB of ids
 * instead of one record per result), and the tombstones its deduplicator has due. The committer
 * calls `prepare` for each transaction it publishes and `committed` or `aborted` after it.
 */
export class DedupChangelog {
  constructor(private readonly opts: DedupChangelogOptions) {}

  prepare(nextOffset: string, completions: readonly RecordCompletion[]): PreparedChangelog {
    const dedup = this.opts.dedup();
    const remembered: RememberedId[] = [];
    for (const c of completions) if (c.remembered !== undefined) remembered.push(c.remembered);
    const { topic, partition } = this.opts;
    const records: OutboundMessage[] = [];
    const segments = encodeDedupSegments(remembered).map((s) => ({
      key: dedupSegmentKey(nextOffset),
      value: s.value,
      entries: s.entries,
    }));
    for (const s of segments) records.push({ topic, partition, key: s.key, value: s.value });
    const tombstones: ChangelogTombstone[] = dedup?.evictExpired(this.opts.now()) ?? [];
    for (const t of tombstones) records.push({ topic, partition, key: t.key, value: null });
    return {
      records,
      committed: () => {
        for (const s of segments) dedup?.assignSegment(s.key, s.entries);
      },
      aborted: () => dedup?.requeueTombstones(tombstones),
    };
  }
}
