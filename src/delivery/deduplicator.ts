/**
 * Remembers request ids of one input partition so a redelivered request becomes a counted duplicate
 * instead of a second result (docs/design.md §5.1). Bounded by TTL and entry count, oldest evicted first.
 *
 * Durability: every `remember` returns a changelog record (key = id, value = expiry as a decimal
 * epoch-ms string) that the caller writes to a compacted topic in the same transaction as the result,
 * so the memory and the results commit or abort together. Evictions produce tombstones so the
 * compacted topic shrinks too: size-bound evictions and expiries queue up as pending tombstones, and
 * `evictExpired(nowMs)` returns the oldest of them, at most `maxTombstoneBytesPerCall` of keys (at
 * least one), so a burst (a partition idle past the TTL, a big restore) spreads over many transactions
 * instead of one over the broker's size limit. Write what it returns in the same transaction as the
 * records it accompanies. On assignment, `restore` replays the changelog partition and queues
 * tombstones for the ids it drops (expired, or beyond maxEntries), so the changelog forgets them too.
 *
 * Complexity: `seen`, `remember` O(1) amortised; `evictExpired` O(evicted) amortised. Eviction order
 * is remember order (re-remembering an id moves it to the back). Clock is injected via `nowMs` args.
 */
export interface ChangelogEntry {
  key: string;
  /**
   * Expiry as decimal epoch ms (written as UTF-8); null = tombstone. `remember` gives it as a string
   * (the producer encodes it straight into the request: no Buffer per record); records read back
   * from the changelog carry it as a Buffer.
   */
  value: Buffer | string | null;
}

/** Resolved options: `ttlMs` and `maxEntries` come from the configuration (`delivery.*`). */
export interface DeduplicatorOptions {
  /** How long an id is remembered, ms (`delivery.dedupTtlMs`). Should exceed the longest redelivery window. */
  ttlMs: number;
  /** Most ids kept; the oldest is evicted beyond it (the partition's share of `delivery.dedupMaxEntries`). */
  maxEntries: number;
  /**
   * Most tombstone key bytes (UTF-8) one `evictExpired` call returns; it returns at least one pending
   * tombstone whatever its size. Default 64 KiB (~1,700 tombstones of 36-char UUIDs).
   */
  maxTombstoneBytesPerCall?: number;
}

export interface RestoreStats {
  /** Ids remembered after the replay. */
  entries: number;
  tombstones: number;
  expired: number;
  /** Records whose value was not a decimal expiry; ignored and kept (a newer format may own them). */
  invalid: number;
  /** Live ids dropped to honour maxEntries (oldest first). */
  evicted: number;
  /** Tombstones queued for the dropped ids (expired or evicted, and not live at the end). */
  queuedTombstones: number;
}

/** Not a configuration key: a bound on one transaction's tombstone bytes, ~1,700 36-char UUIDs. */
const DEFAULT_MAX_TOMBSTONE_BYTES_PER_CALL = 64 * 1024;

interface Slot {
  expiresAtMs: number;
  /** Position stamp; a queue entry whose seq differs from its id's slot is stale. */
  seq: number;
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
  /** Ids dropped from `slots` whose tombstone has not been returned yet, oldest first from `pendingHead`. */
  private pendingTombstones: string[] = [];
  private pendingHead = 0;

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

  /** Remembers `id` until `nowMs + ttlMs`; returns the changelog record to write in the same transaction. */
  remember(id: string, nowMs: number): ChangelogEntry {
    const expiresAt = nowMs + this.ttlMs;
    this.put(id, expiresAt);
    this.evictOverLimit();
    this.compact();
    return { key: id, value: encodeExpiry(expiresAt) };
  }

  /**
   * Drops expired ids, queueing their tombstones, and returns the oldest pending tombstones (expired,
   * size-bound evictions, or dropped by `restore`) up to `maxTombstoneBytesPerCall`.
   */
  evictExpired(nowMs: number): ChangelogEntry[] {
    // With one TTL, ids expire in queue order, so stop at the first live one. Restored entries with
    // out-of-order expiries may linger a while; `seen` still ignores them.
    for (;;) {
      this.skipStale();
      if (this.head >= this.queueIds.length) break;
      const id = this.queueIds[this.head] as string;
      const slot = this.slots.get(id) as Slot;
      if (slot.expiresAtMs > nowMs) break;
      this.head++;
      this.slots.delete(id);
      this.pendingTombstones.push(id);
    }
    this.compact();
    return this.drainTombstones();
  }

  /** Tombstones queued (size-bound evictions, expiries, restore drops) and not yet returned. */
  get pendingTombstoneCount(): number {
    return this.pendingTombstones.length - this.pendingHead;
  }

  /**
   * Replays a changelog partition from its beginning: later records win, tombstones delete, expired
   * and malformed records are skipped, and beyond maxEntries the oldest are dropped. Replaces the
   * current contents. Queues a tombstone for every id it dropped (expired or evicted) that is not
   * live at the end, for the following `evictExpired` calls to return: without them the compacted
   * changelog would keep those records forever (a restore drops them again, but nothing deletes them).
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
    const stats: RestoreStats = {
      entries: 0,
      tombstones: 0,
      expired: 0,
      invalid: 0,
      evicted: 0,
      queuedTombstones: 0,
    };
    for (const entry of entries) {
      if (entry.value === null) {
        this.slots.delete(entry.key);
        dropped.delete(entry.key); // already tombstoned in the changelog
        stats.tombstones++;
        continue;
      }
      const expiresAt = decodeExpiry(entry.value);
      if (expiresAt === null) {
        stats.invalid++;
        continue;
      }
      dropped.delete(entry.key);
      if (expiresAt <= nowMs) {
        this.slots.delete(entry.key);
        dropped.add(entry.key);
        stats.expired++;
        continue;
      }
      this.put(entry.key, expiresAt);
      if (this.slots.size > this.maxEntries) {
        const oldest = this.popOldest();
        if (oldest !== undefined) {
          this.slots.delete(oldest);
          dropped.add(oldest);
          stats.evicted++;
        }
      }
    }
    this.compact();
    this.pendingTombstones = [...dropped];
    stats.entries = this.slots.size;
    stats.queuedTombstones = this.pendingTombstones.length;
    return stats;
  }

  /**
   * Oldest pending tombstones, at most `maxTombstoneBytesPerCall` of keys (at least one). An id that
   * is live again was re-remembered after it was dropped: its tombstone would now delete the newer
   * record, so it is skipped.
   */
  private drainTombstones(): ChangelogEntry[] {
    const out: ChangelogEntry[] = [];
    let bytes = 0;
    while (this.pendingHead < this.pendingTombstones.length) {
      const id = this.pendingTombstones[this.pendingHead] as string;
      if (this.slots.has(id)) {
        this.pendingHead++;
        continue;
      }
      const size = Buffer.byteLength(id, "utf8");
      if (out.length > 0 && bytes + size > this.maxTombstoneBytesPerCall) break;
      bytes += size;
      this.pendingHead++;
      out.push({ key: id, value: null });
    }
    if (this.pendingHead >= 1024 && this.pendingHead * 2 >= this.pendingTombstones.length) {
      this.pendingTombstones = this.pendingTombstones.slice(this.pendingHead);
      this.pendingHead = 0;
    } else if (this.pendingHead === this.pendingTombstones.length) {
      this.pendingTombstones = [];
      this.pendingHead = 0;
    }
    return out;
  }

  private evictOverLimit(): void {
    while (this.slots.size > this.maxEntriesValue) {
      const oldest = this.popOldest();
      if (oldest === undefined) break;
      this.slots.delete(oldest);
      this.pendingTombstones.push(oldest);
    }
  }

  private put(id: string, expiresAtMs: number): void {
    const seq = this.nextSeq++;
    const slot = this.slots.get(id);
    if (slot === undefined) this.slots.set(id, { expiresAtMs, seq });
    else {
      slot.expiresAtMs = expiresAtMs;
      slot.seq = seq;
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
