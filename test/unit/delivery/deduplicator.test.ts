import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { encodeDedupSegments, type RememberedId } from "../../../src/delivery/dedup-segment.js";
import {
  type ChangelogEntry,
  type ChangelogTombstone,
  Deduplicator,
  type DeduplicatorOptions,
  decodeExpiry,
  encodeExpiry,
} from "../../../src/delivery/deduplicator.js";

const HOUR = 3_600_000;
/** The configuration's defaults: `delivery.dedupTtlMs`, and `delivery.dedupMaxEntries` as if one partition were assigned. */
const DEFAULTS: DeduplicatorOptions = {
  ttlMs: defaultConfig().delivery.dedupTtlMs,
  maxEntries: defaultConfig().delivery.dedupMaxEntries,
};

/**
 * What any deduplicator must do, run against the live instance and against one rebuilt from the
 * changelog it wrote (restore must reproduce `seen` exactly, docs/design.md §6.11).
 */
interface DedupUnderTest {
  seen(id: string, nowMs: number): boolean;
  remember(id: string, nowMs: number): void;
  evictExpired(nowMs: number): void;
  readonly size: number;
}

function live(opts: DeduplicatorOptions): DedupUnderTest {
  const d = new Deduplicator(opts);
  return {
    seen: (id, now) => d.seen(id, now),
    remember: (id, now) => void d.remember(id, now),
    evictExpired: (now) => void d.evictExpired(now),
    get size() {
      return d.size;
    },
  };
}

/**
 * What a committed transaction writes for `entries`: one segment (key `s/<first id>` here; the
 * committer's keys are src/delivery/dedup-segment.ts's) as the restore reads it, and the writer told.
 */
function committed(d: Deduplicator, entries: RememberedId[], key = `s/${entries[0]?.id}`): ChangelogEntry {
  const [segment] = encodeDedupSegments(entries);
  d.assignSegment(Buffer.from(key, "latin1"), entries);
  return { key, value: segment?.value ?? null, segment: true };
}

/** Tombstones as the restore reads them back (a segment's key as latin1). */
function asRead(tombstones: ChangelogTombstone[]): ChangelogEntry[] {
  return tombstones.map((t) =>
    typeof t.key === "string"
      ? { key: t.key, value: null }
      : { key: t.key.toString("latin1"), value: null, segment: true },
  );
}

/** A record of the per-id format (before segments): key = id, value = expiry. */
const perId = (e: RememberedId): ChangelogEntry => ({ key: e.id, value: encodeExpiry(e.expiresAtMs) });

/** Tombstone keys as text. */
const keys = (tombstones: ChangelogTombstone[]): string[] => tombstones.map((t) => t.key.toString());

/** Writes everything to a changelog (a segment per id) and answers every query from a fresh restore of it. */
function replayed(opts: DeduplicatorOptions): DedupUnderTest {
  const writer = new Deduplicator(opts);
  const log: ChangelogEntry[] = [];
  let n = 0;
  const rebuilt = (now: number) => {
    const r = new Deduplicator(opts);
    r.restore(compacted(log), now);
    return r;
  };
  let lastNow = 0;
  return {
    seen: (id, now) => {
      lastNow = now;
      log.push(...asRead(writer.evictExpired(now)));
      return rebuilt(now).seen(id, now);
    },
    remember: (id, now) => {
      lastNow = now;
      log.push(committed(writer, [writer.remember(id, now)], `s/${n++}`));
      log.push(...asRead(writer.evictExpired(now)));
    },
    evictExpired: (now) => {
      lastNow = now;
      log.push(...asRead(writer.evictExpired(now)));
    },
    get size() {
      return rebuilt(lastNow).size;
    },
  };
}

for (const [name, make] of [
  ["live", live],
  ["restored from changelog", replayed],
] as const) {
  describe(`Deduplicator conformance: ${name}`, () => {
    it("remembers ids and forgets unknown ones", () => {
      const d = make({ ...DEFAULTS, ttlMs: HOUR });
      expect(d.seen("a", 0)).toBe(false);
      d.remember("a", 0);
      expect(d.seen("a", 1)).toBe(true);
      expect(d.seen("b", 1)).toBe(false);
      expect(d.size).toBe(1);
    });

    it("expires after ttlMs exactly", () => {
      const d = make({ ...DEFAULTS, ttlMs: HOUR });
      d.remember("a", 1000);
      expect(d.seen("a", 1000 + HOUR - 1)).toBe(true);
      expect(d.seen("a", 1000 + HOUR)).toBe(false);
    });

    it("re-remembering extends the TTL", () => {
      const d = make({ ...DEFAULTS, ttlMs: 100 });
      d.remember("a", 0);
      d.remember("a", 80);
      expect(d.seen("a", 150)).toBe(true);
      expect(d.seen("a", 180)).toBe(false);
    });

    it("evicts the oldest beyond maxEntries", () => {
      const d = make({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 3 });
      for (const id of ["a", "b", "c", "d"]) d.remember(id, 10);
      expect(d.seen("a", 11)).toBe(false);
      expect(["b", "c", "d"].map((id) => d.seen(id, 11))).toEqual([true, true, true]);
      expect(d.size).toBe(3);
    });

    it("a re-remembered id moves to the back of the eviction order", () => {
      const d = make({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 2 });
      d.remember("a", 0);
      d.remember("b", 0);
      d.remember("a", 1);
      d.remember("c", 2);
      expect(d.seen("a", 3)).toBe(true);
      expect(d.seen("b", 3)).toBe(false);
    });

    it("evictExpired shrinks it", () => {
      const d = make({ ...DEFAULTS, ttlMs: 100 });
      d.remember("a", 0);
      d.remember("b", 50);
      d.evictExpired(120);
      expect(d.size).toBe(1);
      expect(d.seen("b", 120)).toBe(true);
    });
  });
}

describe("Deduplicator changelog records", () => {
  it("remember returns the id and its expiry, for its transaction's segment", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: 500 });
    expect(d.remember("req-1", 1_750_000_000_000)).toEqual({ id: "req-1", expiresAtMs: 1_750_000_000_500 });
  });

  it("a segment is tombstoned once none of its ids is live there: evicted, expired or in a later segment", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: 100, maxEntries: 3 });
    committed(d, [d.remember("a", 0), d.remember("b", 0)], "s1");
    committed(d, [d.remember("c", 50)], "s2");
    d.remember("d", 60); // evicts a; b still lives in s1
    expect(d.pendingTombstoneCount).toBe(0);
    committed(d, [d.remember("b", 60)], "s3"); // b expired? no: remembered again, now in s3; s1 is empty
    expect(keys(d.evictExpired(60))).toEqual(["s1"]);
    expect(keys(d.evictExpired(155))).toEqual(["s2"]); // c expires at 150; d was never committed
    expect(d.evictExpired(155)).toEqual([]);
    expect(keys(d.evictExpired(160))).toEqual(["s3"]);
  });

  it("ids evicted before their transaction committed leave the segment empty: tombstoned at once", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 1 });
    const a = d.remember("a", 0);
    d.remember("b", 0); // evicts a while its transaction is still open
    committed(d, [a], "s1");
    expect(keys(d.evictExpired(0))).toEqual(["s1"]);
  });

  it("tombstones of an aborted transaction are queued again, first", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: 100 });
    committed(d, [d.remember("a", 0)], "s1");
    committed(d, [d.remember("b", 10)], "s2");
    const first = d.evictExpired(105);
    expect(keys(first)).toEqual(["s1"]);
    d.requeueTombstones(first);
    expect(keys(d.evictExpired(115))).toEqual(["s1", "s2"]);
  });

  it("restore reads segments: later records win, a segment's tombstone deletes only the ids whose latest record it is", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR });
    const seg = (key: string, entries: [string, number][]): ChangelogEntry => ({
      key,
      value: encodeDedupSegments(entries.map(([id, expiresAtMs]) => ({ id, expiresAtMs })))[0]?.value ?? null,
      segment: true,
    });
    const stats = d.restore(
      [
        { key: "legacy", value: encodeExpiry(5000) },
        { key: "moved", value: encodeExpiry(5000) }, // its segment record below supersedes it
        seg("s1", [
          ["a", 5000],
          ["b", 5000],
          ["moved", 6000],
        ]),
        seg("s2", [
          ["b", 7000],
          ["old", 900],
        ]),
        { key: "s1", value: null, segment: true }, // deletes a (b lives in s2, moved in s1: deleted too)
        { key: "broken", value: Buffer.from("{}"), segment: true },
        { key: "moved", value: null }, // a per-id tombstone: the per-id record only
      ],
      1000,
    );
    expect(stats).toEqual({
      entries: 2,
      segments: 2, // readable ones
      tombstones: 2,
      expired: 1,
      invalid: 1,
      evicted: 0,
      queuedTombstones: 0,
    });
    expect(["legacy", "a", "b", "moved", "old"].filter((id) => d.seen(id, 1000))).toEqual(["legacy", "b"]);
  });

  it("restore queues tombstones for segments left without a live id and per-id records it superseded", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 2 });
    const seg = (key: string, ids: string[]): ChangelogEntry => ({
      key,
      value: encodeDedupSegments(ids.map((id) => ({ id, expiresAtMs: 5000 })))[0]?.value ?? null,
      segment: true,
    });
    const stats = d.restore(
      [{ key: "x", value: encodeExpiry(5000) }, seg("s1", ["a", "x"]), seg("s2", ["b", "c"])],
      1000,
    );
    // a and x are evicted by the bound of 2: s1 is empty, x's per-id record superseded.
    expect(stats).toMatchObject({ entries: 2, evicted: 2, queuedTombstones: 2 });
    expect(keys(d.evictExpired(1000))).toEqual(["x", "s1"]);
  });

  it("restore: later records win, tombstones delete, expired and malformed records are skipped", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR });
    d.remember("stale", 0); // replaced by restore
    const stats = d.restore(
      [
        { key: "a", value: encodeExpiry(5000) },
        { key: "b", value: encodeExpiry(5000) },
        { key: "b", value: null },
        { key: "c", value: encodeExpiry(5000) },
        { key: "c", value: encodeExpiry(900) }, // later record wins even though it is expired
        { key: "d", value: Buffer.from("not-a-number") },
        { key: "e", value: encodeExpiry(1000) }, // expires exactly now
      ],
      1000,
    );
    expect(stats).toEqual({
      entries: 1,
      segments: 0,
      tombstones: 1,
      expired: 2,
      invalid: 1,
      evicted: 0,
      queuedTombstones: 2,
    });
    expect(["a", "b", "c", "d", "e", "stale"].filter((id) => d.seen(id, 1000))).toEqual(["a"]);
    // The expired ids get tombstones (b already has one; d's value may belong to a newer format).
    expect(d.evictExpired(1000)).toEqual([
      { key: "c", value: null },
      { key: "e", value: null },
    ]);
    expect(d.evictExpired(1000)).toEqual([]);
  });

  it("restore honours maxEntries, keeping the newest", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 2 });
    d.restore(
      ["a", "b", "c"].map((key) => ({ key, value: encodeExpiry(10_000) })),
      0,
    );
    expect(d.size).toBe(2);
    expect(d.seen("a", 0)).toBe(false);
    expect(d.seen("c", 0)).toBe(true);
    expect(d.evictExpired(0)).toEqual([{ key: "a", value: null }]);
  });

  it("decodeExpiry rejects non-integers", () => {
    for (const bad of ["", "1.5", "1e3", "abc", "99999999999999999"])
      expect(decodeExpiry(Buffer.from(bad))).toBeNull();
  });

  it("validates options", () => {
    expect(() => new Deduplicator({ ...DEFAULTS, ttlMs: 0 })).toThrow(/ttlMs/);
    expect(() => new Deduplicator({ ...DEFAULTS, maxEntries: 0 })).toThrow(/maxEntries/);
    expect(new Deduplicator(DEFAULTS).ttlMs).toBe(24 * HOUR);
  });

  it("holds its size bound over many operations and tombstones each segment once all its ids are evicted", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 20_000 });
    let tombstones = 0;
    let open: RememberedId[] = [];
    for (let i = 0; i < 60_000; i++) {
      if (!d.seen(`id-${i}`, i)) open.push(d.remember(`id-${i}`, i));
      if (open.length === 100) {
        committed(d, open); // a transaction of 100 ids
        open = [];
      }
      if (i % 1000 === 0) tombstones += d.evictExpired(i).length;
    }
    tombstones += d.evictExpired(60_000).length;
    expect(d.size).toBe(20_000);
    expect(tombstones).toBe(400); // 40,000 evicted ids, 100 a segment
  });
});

/** Kafka compaction in miniature: latest record per key (an id's or a segment's), tombstoned keys gone. */
function compacted(log: ChangelogEntry[]): ChangelogEntry[] {
  const latest = new Map<string, ChangelogEntry>();
  for (const e of log) {
    const key = `${e.segment ? "segment" : "id"}:${e.key}`;
    latest.delete(key);
    if (e.value !== null) latest.set(key, e);
  }
  return [...latest.values()];
}

describe("Deduplicator restore queues tombstones for what it drops", () => {
  it("after restore and the following transactions, the compacted changelog holds only live ids", () => {
    const opts = { ttlMs: 1000, maxEntries: 300 };
    const writer = new Deduplicator(opts);
    const log: ChangelogEntry[] = [];
    for (let i = 0; i < 1000; i++) log.push(perId(writer.remember(`id-${i}`, i))); // expiries 1000..1999
    // writer's own size-bound tombstones are deliberately not written: an instance that died before
    // its next transaction. The restoring owner must clean up anyway.
    const now = 1500; // id-0..id-500 expired; of the other 499, maxEntries keeps the newest 300
    const owner = new Deduplicator(opts);
    const stats = owner.restore(compacted(log), now);
    expect(stats).toMatchObject({ entries: 300, expired: 501, evicted: 199, queuedTombstones: 700 });
    let calls = 0;
    while (owner.pendingTombstoneCount > 0) {
      log.push(...asRead(owner.evictExpired(now)));
      calls++;
    }
    expect(calls).toBe(1); // 700 short keys fit in one call's 64 KiB
    const live = compacted(log).map((e) => e.key);
    expect(live).toHaveLength(300);
    expect(live).toEqual(Array.from({ length: 300 }, (_, i) => `id-${700 + i}`));
    // A second restore of the cleaned changelog agrees with the owner and drops nothing more.
    const again = new Deduplicator(opts);
    expect(again.restore(compacted(log), now)).toMatchObject({ entries: 300, queuedTombstones: 0 });
    for (let i = 0; i < 1000; i++) expect(again.seen(`id-${i}`, now)).toBe(owner.seen(`id-${i}`, now));
  });

  it("queues no tombstone for an id whose later record is live or already a tombstone", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 10 });
    const stats = d.restore(
      [
        { key: "back", value: encodeExpiry(5) }, // expired, then remembered again
        { key: "gone", value: encodeExpiry(5) }, // expired, then tombstoned
        { key: "back", value: encodeExpiry(5000) },
        { key: "gone", value: null },
      ],
      10,
    );
    expect(stats).toMatchObject({ entries: 1, expired: 2, queuedTombstones: 0 });
    expect(d.evictExpired(10)).toEqual([]);
  });

  it("an id remembered again before its per-id tombstone went out keeps its new record (a segment)", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxTombstoneBytesPerCall: 1 });
    d.restore(
      ["x", "y", "z"].map((key) => ({ key, value: encodeExpiry(5) })),
      10,
    );
    expect(d.pendingTombstoneCount).toBe(3);
    const log: ChangelogEntry[] = [];
    log.push(committed(d, [d.remember("y", 10)])); // y comes back before its tombstone is written
    while (d.pendingTombstoneCount > 0) log.push(...asRead(d.evictExpired(10)));
    // The per-id tombstone of y deletes its old record only; its segment keeps it.
    expect(log.filter((e) => e.value === null).map((e) => e.key)).toEqual(["x", "y", "z"]);
    const rebuilt = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR });
    rebuilt.restore(log, 10);
    expect(rebuilt.seen("y", 10)).toBe(true);
  });

  it("spreads a large backlog over calls: at most maxTombstoneBytesPerCall of keys, at least one", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxTombstoneBytesPerCall: 100 });
    const ids = [...Array.from({ length: 50 }, (_, i) => `k${String(i).padStart(8, "0")}`), "é".repeat(80)];
    d.restore(
      ids.map((key) => ({ key, value: encodeExpiry(1) })),
      2,
    );
    const drained: string[] = [];
    for (;;) {
      const batch = d.evictExpired(2);
      if (batch.length === 0) break;
      const bytes = batch.reduce((n, e) => n + Buffer.byteLength(e.key.toString()), 0);
      // 9-byte keys: 11 per call; the 160-byte key goes out alone.
      expect(bytes <= 100 || batch.length === 1).toBe(true);
      drained.push(...keys(batch));
    }
    expect(drained).toEqual(ids);
    expect(d.pendingTombstoneCount).toBe(0);
  });

  it("the per-call cap also spreads expiries of a partition idle past the TTL", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: 100, maxTombstoneBytesPerCall: 1000 });
    for (let i = 0; i < 5000; i++) committed(d, [d.remember(`request-${String(i).padStart(6, "0")}`, 0)]); // 16-byte keys
    const first = d.evictExpired(1000);
    expect(first).toHaveLength(62);
    expect(d.size).toBe(0); // forgotten at once; only the changelog writes are spread
    let total = first.length;
    while (d.pendingTombstoneCount > 0) total += d.evictExpired(1000).length;
    expect(total).toBe(5000);
  });

  it("validates maxTombstoneBytesPerCall", () => {
    expect(() => new Deduplicator({ ...DEFAULTS, maxTombstoneBytesPerCall: 0 })).toThrow(
      /maxTombstoneBytesPerCall/,
    );
    expect(new Deduplicator(DEFAULTS).maxTombstoneBytesPerCall).toBe(64 * 1024);
  });
});

describe("Deduplicator.setMaxEntries (a per-instance budget re-split on assignment)", () => {
  it("shrinking evicts the oldest ids at once and tombstones them; growing keeps new ids longer", () => {
    const d = new Deduplicator({ ...DEFAULTS, ttlMs: HOUR, maxEntries: 10 });
    for (let i = 0; i < 10; i++) committed(d, [d.remember(`id-${i}`, i)]);
    d.setMaxEntries(4);
    expect(d.maxEntries).toBe(4);
    expect(d.size).toBe(4);
    expect(Array.from({ length: 10 }, (_, i) => d.seen(`id-${i}`, 100))).toEqual([
      ...Array(6).fill(false),
      ...Array(4).fill(true),
    ]);
    expect(keys(d.evictExpired(100))).toEqual(Array.from({ length: 6 }, (_, i) => `s/id-${i}`));
    d.setMaxEntries(8);
    for (let i = 10; i < 14; i++) d.remember(`id-${i}`, i);
    expect(d.size).toBe(8);
    expect(() => d.setMaxEntries(0)).toThrow(RangeError);
  });
});
