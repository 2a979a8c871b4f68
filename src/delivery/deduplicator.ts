import { decodeDedupSegment, type RememberedId } from "./dedup-segment.js";

/**
 * Remembers request ids of one input partition so a redelivered request becomes a counted duplicate
 * instead of a second result (docs/design.md §5.1). Bounded by TTL and entry count, oldest evicted first.
 *
 * Durability: `remember` returns the id and its expiry; the partition's committer writes the ids
 * of one transaction as dedup segments (src/delivery/dedup-segment.ts, one record for many ids) to
 * a compacted topic in the same transaction as the results, so the memory and the results commit
 * or abort together, and tells `assignSegment` once it committed. A segment whose ids are all gone
 * (expired, evicted by the size bound, or remembered again in a later segment) gets a tombstone so
 * the compacted topic shrinks too: those, and tombstones for ids of the older format (one record
 * per id, key = id, value = expiry), queue up, and `evictExpired(nowMs)` returns the oldest of them,
 * at most `maxTombstoneBytesPerCall` of keys (at least one), so a burst (a partition idle past the
 * TTL, a big restore) spreads over many transactions instead of one over the broker's size limit.
 * Write what it returns in a transaction of this partition (`requeueTombstones` when it aborted).
 * On assignment, `restore` replays the changelog partition (both formats) and queues tombstones for
 * what it dropped (expired, or beyond maxEntries), so the changelog forgets them too.
 *
 * Complexity: `seen`, `remember` O(1) amortised; `evictExpired` O(evicted) amortised;
 * `assignSegment` O(ids). Eviction order is remember order (re-remembering an id moves it to the
 * back). Clock is injected via `nowMs` args.
 */
export interface ChangelogEntry {
  /** The request id; for a segment, its record key as latin1 (`segment: true`). */
  key: string;
  /**
   * A per-id record's expiry as decimal epoch ms (UTF-8), or a segment's value; null = tombstone.
   */
  value: Buffer | string | null;
  /** The record is a dedup segment (its key starts with DEDUP_SEGMENT_KEY_PREFIX). */
  segment?: boolean;
}

/** A tombstone to write: an id of the per-id format (string) or a segment's key (Buffer). */
export interface ChangelogTombstone {
  key: string | Buffer;
  value: null;
}

/** Resolved options: `ttlMs` and `maxEntries` come from the configuration (`delivery.*`). */
export interface DeduplicatorOptions {
  /** How long an id is remembered, ms (`delivery.dedupTtlMs`). Should exceed the longest redelivery window. */
  ttlMs: number;
  /** Most ids kept; the oldest is evicted beyond it (the partition's share of `delivery.dedupMaxEntries`). */
  maxEntries: number;
  /**
   * Most tombstone key bytes one `evictExpired` call returns; it returns at least one pending
   * tombstone whatever its size. Default 64 KiB (~1,700 tombstones of 36-char UUIDs).
   */
  maxTombstoneBytesPerCall?: number;
}

export interface RestoreStats {
  /** Ids remembered after the replay. */
  entries: number;
  /** Dedup segments read and understood (each holds the ids of one transaction or part of one). */
  segments: number;
  tombstones: number;
  expired: number;
  /** Records whose value this version cannot read; ignored and kept (a newer format may own them). */
  invalid: number;
  /** Live ids dropped to honour maxEntries (oldest first). */
  evicted: number;
  /** Tombstones queued: per-id records and segments left with no live id. */
  queuedTombstones: number;
}

/** Not a configuration key: a bound on one transaction's tombstone bytes, ~1,700 36-char UUIDs. */
const DEFAULT_MAX_TOMBSTONE_BYTES_PER_CALL = 64 * 1024;

/** A segment in the changelog: its key and how many ids are live in it (latest there, not expired). */
interface Segment {
  key: Buffer;
  live: number;
}

/** Where a live id's changelog record is: a per-id record (older format) or a segment. */
const PER_ID_RECORD = "per-id";

interface Slot {
  expiresAtMs: number;
  /** Position stamp; a queue entry whose seq differs from its id's slot is stale. */
  seq: number;
  /** Its changelog record; undefined while its transaction has not committed. */
  record: Segment | typeof PER_ID_RECORD | undefined;
}

export class Deduplicator {
  readonly ttlMs: number;
  private maxEntriesValue: number;
  readonly maxTombstoneBytesPerCall: number;
  private readonly slots = new Map<string, Slot>();
  // Eviction order lives in our own index-based queue, not in the Map's iteration order: V8 Maps keep
  // holes for deleted entries until they rehash, so repeatedly reading the first key after deleting
  // from the front is O(holes) and the whole thing turns quadratic (measured: 200k ops took 5.8 s).
  private queueIds: string[] = [];
  private queueSeqs: number[] = [];
  private head = 0;
  private nextSeq = 0;
  /**
   * Keys whose tombstone has not been returned yet, oldest first from `pendingHead`: ids of per-id
   * records (string) and segments with no live id (Buffer).
   */
  private pendingTombstones: (string | Buffer)[] = [];
  private pendingHead = 0;
  /** While `restore` runs: ids of per-id records it dropped (tombstoned at its end unless live again). */
  private restoreDropped: Set<string> | undefined;

  constructor(opts: DeduplicatorOptions) {
    this.ttlMs = opts.ttlMs;
    this.maxEntriesValue = opts.maxEntries;
    this.maxTombstoneBytesPerCall = opts.maxTombstoneBytesPerCall ?? DEFAULT_MAX_TOMBSTONE_BYTES_PER_CALL;
    if (!Number.isFinite(this.ttlMs) || this.ttlMs <= 0) {
      throw new RangeError(`Deduplicator: ttlMs must be a positive number of ms, got ${String(opts.ttlMs)}`);
    }
    if (!Number.isInteger(this.maxEntries) || this.maxEntries < 1) {
      throw new RangeError(`Deduplicator: maxEntries must be an integer ≥ 1, got ${String(opts.maxEntries)}`);
    }
    if (!Number.isInteger(this.maxTombstoneBytesPerCall) || this.maxTombstoneBytesPerCall < 1) {
      throw new RangeError(
        `Deduplicator: maxTombstoneBytesPerCall must be an integer ≥ 1, got ${String(opts.maxTombstoneBytesPerCall)}`,
      );
    }
  }

  get size(): number {
    return this.slots.size;
  }

  /** Most ids kept (see `setMaxEntries`). */
  get maxEntries(): number {
    return this.maxEntriesValue;
  }

  /**
   * Changes the bound (the processor splits a per-instance budget over its partitions and re-splits
   * on every assignment). Shrinking evicts the oldest ids at once and queues their tombstones.
   */
  setMaxEntries(maxEntries: number): void {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`Deduplicator: maxEntries must be an integer ≥ 1, got ${String(maxEntries)}`);
    }
    this.maxEntriesValue = maxEntries;
    this.evictOverLimit();
    this.compact();
  }

  /** True if `id` was remembered and has not expired at `nowMs`. */
  seen(id: string, nowMs: number): boolean {
    const slot = this.slots.get(id);
    return slot !== undefined && slot.expiresAtMs > nowMs;
  }

  /**
   * Remembers `id` until `nowMs + ttlMs`; returns what its transaction writes to the changelog (in
   * a segment), and `assignSegment` is told when that transaction committed.
   */
  remember(id: string, nowMs: number): RememberedId {
    const expiresAtMs = nowMs + this.ttlMs;
    this.put(id, expiresAtMs, undefined);
    this.evictOverLimit();
    this.compact();
    return { id, expiresAtMs };
  }

  /**
   * The segment `key` holding `entries` committed: each id still remembered with that expiry and not
   * yet in a committed record now lives there. A segment none of whose ids is live any more (all
   * evicted meanwhile) gets its tombstone queued at once.
   */
  assignSegment(key: Buffer, entries: readonly RememberedId[]): void {
    const segment: Segment = { key, live: 0 };
    for (const e of entries) {
      const slot = this.slots.get(e.id);
      if (slot === undefined || slot.record !== undefined || slot.expiresAtMs !== e.expiresAtMs) continue;
      slot.record = segment;
      segment.live++;
    }
    if (segment.live === 0) this.pendingTombstones.push(key);
  }

  /**
   * Drops expired ids, queueing the tombstones that makes due, and returns the oldest pending
   * tombstones (expiries, size-bound evictions, restore drops) up to `maxTombstoneBytesPerCall`.
   */
  evictExpired(nowMs: number): ChangelogTombstone[] {
    // With one TTL, ids expire in queue order, so stop at the first live one. Restored entries with
    // out-of-order expiries may linger a while; `seen` still ignores them.
    for (;;) {
      this.skipStale();
      if (this.head >= this.queueIds.length) break;
      const id = this.queueIds[this.head] as string;
      const slot = this.slots.get(id) as Slot;
      if (slot.expiresAtMs > nowMs) break;
      this.head++;
      this.drop(id, slot);
    }
    this.compact();
    return this.drainTombstones();
  }

  /**
   * Tombstones an `evictExpired` call returned for a transaction that then aborted: queued again,
   * first, for the next one.
   */
  requeueTombstones(tombstones: readonly ChangelogTombstone[]): void {
    if (tombstones.length === 0) return;
    this.pendingTombstones = [
      ...tombstones.map((t) => t.key),
      ...this.pendingTombstones.slice(this.pendingHead),
    ];
    this.pendingHead = 0;
  }

  /** Tombstones queued (size-bound evictions, expiries, restore drops) and not yet returned. */
  get pendingTombstoneCount(): number {
    return this.pendingTombstones.length - this.pendingHead;
  }

  /**
   * Replays a changelog partition from its beginning, per-id records and segments alike: later
   * records win, tombstones delete (a segment's, only the ids whose latest record it was), expired
   * and unreadable records are skipped, and beyond maxEntries the oldest are dropped. Replaces the
   * current contents. Queues a tombstone for every per-id record it dropped (expired, evicted or
   * superseded) and every segment left without a live id, for the following `evictExpired` calls
   * to return: without them the compacted changelog would keep those records forever.
   */
  restore(entries: Iterable<ChangelogEntry>, nowMs: number): RestoreStats {
    this.slots.clear();
    this.queueIds = [];
    this.queueSeqs = [];
    this.head = 0;
    this.pendingTombstones = [];
    this.pendingHead = 0;
    // Insertion-ordered, so tombstones go out in changelog order; a later record for the id removes it.
    const dropped = new Set<string>();
    this.restoreDropped = dropped;
    const segments = new Map<string, { segment: Segment; ids: string[] }>();
    const stats: RestoreStats = {
      entries: 0,
      segments: 0,
      tombstones: 0,
      expired: 0,
      invalid: 0,
      evicted: 0,
      queuedTombstones: 0,
    };
    try {
      for (const entry of entries) {
        if (entry.segment === true) this.restoreSegment(entry, nowMs, segments, stats);
        else this.restorePerId(entry, nowMs, stats);
      }
    } finally {
      this.restoreDropped = undefined;
    }
    this.compact();
    this.pendingTombstones = [...dropped];
    for (const { segment } of segments.values())
      if (segment.live === 0) this.pendingTombstones.push(segment.key);
    stats.entries = this.slots.size;
    stats.segments = segments.size;
    stats.queuedTombstones = this.pendingTombstones.length;
    return stats;
  }

  private restorePerId(entry: ChangelogEntry, nowMs: number, stats: RestoreStats): void {
    const dropped = this.restoreDropped as Set<string>;
    if (entry.value === null) {
      // Deletes the id's per-id record only; an id whose latest record is a segment keeps it.
      const slot = this.slots.get(entry.key);
      if (slot?.record === PER_ID_RECORD) this.slots.delete(entry.key);
      dropped.delete(entry.key); // already tombstoned in the changelog
      stats.tombstones++;
      return;
    }
    const expiresAt = decodeExpiry(entry.value);
    if (expiresAt === null) {
      stats.invalid++;
      return;
    }
    dropped.delete(entry.key); // its record is this one now
    if (!this.restoreId(entry.key, expiresAt, PER_ID_RECORD, nowMs, stats)) dropped.add(entry.key);
  }

  private restoreSegment(
    entry: ChangelogEntry,
    nowMs: number,
    segments: Map<string, { segment: Segment; ids: string[] }>,
    stats: RestoreStats,
  ): void {
    if (entry.value === null) {
      // The segment's ids whose latest record it is are gone; later records of its ids stay.
      const known = segments.get(entry.key);
      if (known !== undefined) {
        for (const id of known.ids) {
          const slot = this.slots.get(id);
          if (slot?.record === known.segment) this.slots.delete(id);
        }
        known.segment.live = -1; // tombstoned already: never queued again
      }
      stats.tombstones++;
      return;
    }
    const decoded = decodeDedupSegment(entry.value);
    if (decoded === null) {
      stats.invalid++;
      return;
    }
    const segment: Segment = { key: Buffer.from(entry.key, "latin1"), live: 0 };
    segments.set(entry.key, { segment, ids: decoded.map((e) => e.id) });
    for (const e of decoded) this.restoreId(e.id, e.expiresAtMs, segment, nowMs, stats);
  }

  /**
   * Restore: the id's latest record says `expiresAt`. Expired, the id is forgotten (false);
   * otherwise it is remembered in `record` and maxEntries honoured (true).
   */
  private restoreId(
    id: string,
    expiresAt: number,
    record: Segment | typeof PER_ID_RECORD,
    nowMs: number,
    stats: RestoreStats,
  ): boolean {
    if (expiresAt <= nowMs) {
      const slot = this.slots.get(id);
      if (slot !== undefined) this.drop(id, slot);
      stats.expired++;
      return false;
    }
    this.put(id, expiresAt, record);
    this.evictOneOverLimit(stats);
    return true;
  }

  /** Restore: honours maxEntries after one put, dropping the oldest id. */
  private evictOneOverLimit(stats: RestoreStats): void {
    if (this.slots.size <= this.maxEntries) return;
    const oldest = this.popOldest();
    if (oldest === undefined) return;
    this.drop(oldest, this.slots.get(oldest) as Slot);
    stats.evicted++;
  }

  /**
   * Forgets `id` and queues what its record needs: a per-id record its tombstone (at the end of a
   * restore), a segment its own once no id lives there. An id whose transaction has not committed
   * yet has no record to tombstone.
   */
  private drop(id: string, slot: Slot): void {
    this.slots.delete(id);
    this.release(id, slot);
  }

  /** The id's record no longer holds its live entry. */
  private release(id: string, slot: Slot): void {
    const record = slot.record;
    if (record === undefined) return;
    if (record === PER_ID_RECORD) {
      if (this.restoreDropped !== undefined) this.restoreDropped.add(id);
      else this.pendingTombstones.push(id);
      return;
    }
    record.live--;
    // During a restore, segments left without a live id are queued at its end.
    if (record.live === 0 && this.restoreDropped === undefined) this.pendingTombstones.push(record.key);
  }

  /**
   * Oldest pending tombstones, at most `maxTombstoneBytesPerCall` of keys (at least one). An id of a
   * per-id record that is live there again would lose its new record to the tombstone: skipped.
   */
  private drainTombstones(): ChangelogTombstone[] {
    const out: ChangelogTombstone[] = [];
    let bytes = 0;
    while (this.pendingHead < this.pendingTombstones.length) {
      const key = this.pendingTombstones[this.pendingHead] as string | Buffer;
      if (typeof key === "string" && this.slots.get(key)?.record === PER_ID_RECORD) {
        this.pendingHead++;
        continue;
      }
      const size = typeof key === "string" ? Buffer.byteLength(key, "utf8") : key.length;
      if (out.length > 0 && bytes + size > this.maxTombstoneBytesPerCall) break;
      bytes += size;
      this.pendingHead++;
      out.push({ key, value: null });
    }
    if (this.pendingHead >= 1024 && this.pendingHead * 2 >= this.pendingTombstones.length) {
      this.pendingTombstones = this.pendingTombstones.slice(this.pendingHead);
      this.pendingHead = 0;
    } else if (this.pendingHead === this.pendingTombstones.length) {
      if (this.pendingTombstones.length > 0) this.pendingTombstones = [];
      this.pendingHead = 0;
    }
    return out;
  }

  private evictOverLimit(): void {
    while (this.slots.size > this.maxEntriesValue) {
      const oldest = this.popOldest();
      if (oldest === undefined) break;
      this.drop(oldest, this.slots.get(oldest) as Slot);
    }
  }

  private put(id: string, expiresAtMs: number, record: Slot["record"]): void {
    const seq = this.nextSeq++;
    if (record !== undefined && record !== PER_ID_RECORD) record.live++;
    const slot = this.slots.get(id);
    if (slot === undefined) this.slots.set(id, { expiresAtMs, seq, record });
    else {
      // The id's older record no longer holds it (a per-id record replaced by one of its own key
      // needs no tombstone: compaction keeps the newer).
      if (!(record === PER_ID_RECORD && slot.record === PER_ID_RECORD)) this.release(id, slot);
      slot.expiresAtMs = expiresAtMs;
      slot.seq = seq;
      slot.record = record;
    }
    this.queueIds.push(id);
    this.queueSeqs.push(seq);
  }

  /** Advances `head` past entries whose id was deleted or re-remembered later. */
  private skipStale(): void {
    while (this.head < this.queueIds.length) {
      const slot = this.slots.get(this.queueIds[this.head] as string);
      if (slot !== undefined && slot.seq === this.queueSeqs[this.head]) return;
      this.head++;
    }
  }

  private popOldest(): string | undefined {
    this.skipStale();
    if (this.head >= this.queueIds.length) return undefined;
    const id = this.queueIds[this.head] as string;
    this.head++;
    return id;
  }

  /** Drops consumed and stale queue entries once they outnumber the live ones (amortised O(1)). */
  private compact(): void {
    const total = this.queueIds.length;
    const consumedMost = this.head >= 1024 && this.head * 2 >= total;
    const tooStale = total - this.head > 2 * this.slots.size + 1024;
    if (!consumedMost && !tooStale) return;
    const ids: string[] = [];
    const seqs: number[] = [];
    for (let i = this.head; i < this.queueIds.length; i++) {
      const id = this.queueIds[i] as string;
      const seq = this.queueSeqs[i] as number;
      if (this.slots.get(id)?.seq === seq) {
        ids.push(id);
        seqs.push(seq);
      }
    }
    this.queueIds = ids;
    this.queueSeqs = seqs;
    this.head = 0;
  }
}

/** A changelog value: the expiry as a decimal epoch-ms string (the producer writes it as UTF-8). */
export function encodeExpiry(expiresAtMs: number): string {
  return String(Math.trunc(expiresAtMs));
}

/** Expiry from a changelog value; null when it is not a decimal integer. */
export function decodeExpiry(value: Buffer | string): number | null {
  const s = typeof value === "string" ? value : value.toString("utf8");
  if (!/^-?\d{1,16}$/.test(s)) return null;
  const n = Number(s);
  return Number.isSafeInteger(n) ? n : null;
}
