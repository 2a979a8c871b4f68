import { describe, expect, it } from "vitest";
import {
  type ChangelogEntry,
  Deduplicator,
  type DeduplicatorOptions,
  decodeExpiry,
  encodeExpiry,
} from "../../../src/delivery/deduplicator.js";

const HOUR = 3_600_000;

/**
 * What any deduplicator must do, run against the live instance and against one rebuilt from the
 * changelog it wrote (restore must reproduce `seen` exactly, DESIGN.md §6.11).
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

/** Writes everything to a changelog and answers every query from a fresh restore of it. */
function replayed(opts: DeduplicatorOptions): DedupUnderTest {
  const writer = new Deduplicator(opts);
  const log: ChangelogEntry[] = [];
  const rebuilt = (now: number) => {
    const r = new Deduplicator(opts);
    r.restore(log, now);
    return r;
  };
  let lastNow = 0;
  return {
    seen: (id, now) => {
      lastNow = now;
      log.push(...writer.evictExpired(now));
      return rebuilt(now).seen(id, now);
    },
    remember: (id, now) => {
      lastNow = now;
      log.push(writer.remember(id, now));
      log.push(...writer.evictExpired(now));
    },
    evictExpired: (now) => {
      lastNow = now;
      log.push(...writer.evictExpired(now));
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
      const d = make({ ttlMs: HOUR });
      expect(d.seen("a", 0)).toBe(false);
      d.remember("a", 0);
      expect(d.seen("a", 1)).toBe(true);
      expect(d.seen("b", 1)).toBe(false);
      expect(d.size).toBe(1);
    });

    it("expires after ttlMs exactly", () => {
      const d = make({ ttlMs: HOUR });
      d.remember("a", 1000);
      expect(d.seen("a", 1000 + HOUR - 1)).toBe(true);
      expect(d.seen("a", 1000 + HOUR)).toBe(false);
    });

    it("re-remembering extends the TTL", () => {
      const d = make({ ttlMs: 100 });
      d.remember("a", 0);
      d.remember("a", 80);
      expect(d.seen("a", 150)).toBe(true);
      expect(d.seen("a", 180)).toBe(false);
    });

    it("evicts the oldest beyond maxEntries", () => {
      const d = make({ ttlMs: HOUR, maxEntries: 3 });
      for (const id of ["a", "b", "c", "d"]) d.remember(id, 10);
      expect(d.seen("a", 11)).toBe(false);
      expect(["b", "c", "d"].map((id) => d.seen(id, 11))).toEqual([true, true, true]);
      expect(d.size).toBe(3);
    });

    it("a re-remembered id moves to the back of the eviction order", () => {
      const d = make({ ttlMs: HOUR, maxEntries: 2 });
      d.remember("a", 0);
      d.remember("b", 0);
      d.remember("a", 1);
      d.remember("c", 2);
      expect(d.seen("a", 3)).toBe(true);
      expect(d.seen("b", 3)).toBe(false);
    });

    it("evictExpired shrinks it", () => {
      const d = make({ ttlMs: 100 });
      d.remember("a", 0);
      d.remember("b", 50);
      d.evictExpired(120);
      expect(d.size).toBe(1);
      expect(d.seen("b", 120)).toBe(true);
    });
  });
}

describe("Deduplicator changelog records", () => {
  it("remember returns the record to write: key id, value the decimal expiry", () => {
    const d = new Deduplicator({ ttlMs: 500 });
    const entry = d.remember("req-1", 1_750_000_000_000);
    expect(entry.key).toBe("req-1");
    expect(entry.value?.toString()).toBe("1750000000500");
    expect(decodeExpiry(entry.value!)).toBe(1_750_000_000_500);
  });

  it("size-bound evictions become pending tombstones, drained by evictExpired with the expired ones", () => {
    const d = new Deduplicator({ ttlMs: 100, maxEntries: 2 });
    d.remember("a", 0);
    d.remember("b", 50);
    d.remember("c", 60); // evicts a
    expect(d.pendingTombstoneCount).toBe(1);
    const t = d.evictExpired(155); // b expires at 150
    expect(t).toEqual([
      { key: "a", value: null },
      { key: "b", value: null },
    ]);
    expect(d.pendingTombstoneCount).toBe(0);
    expect(d.evictExpired(155)).toEqual([]);
  });

  it("restore: later records win, tombstones delete, expired and malformed records are skipped", () => {
    const d = new Deduplicator({ ttlMs: HOUR });
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
    expect(stats).toEqual({ entries: 1, tombstones: 1, expired: 2, invalid: 1 });
    expect(["a", "b", "c", "d", "e", "stale"].filter((id) => d.seen(id, 1000))).toEqual(["a"]);
  });

  it("restore honours maxEntries, keeping the newest", () => {
    const d = new Deduplicator({ ttlMs: HOUR, maxEntries: 2 });
    d.restore(
      ["a", "b", "c"].map((key) => ({ key, value: encodeExpiry(10_000) })),
      0,
    );
    expect(d.size).toBe(2);
    expect(d.seen("a", 0)).toBe(false);
    expect(d.seen("c", 0)).toBe(true);
  });

  it("decodeExpiry rejects non-integers", () => {
    for (const bad of ["", "1.5", "1e3", "abc", "99999999999999999"])
      expect(decodeExpiry(Buffer.from(bad))).toBeNull();
  });

  it("validates options", () => {
    expect(() => new Deduplicator({ ttlMs: 0 })).toThrow(/ttlMs/);
    expect(() => new Deduplicator({ maxEntries: 0 })).toThrow(/maxEntries/);
    expect(new Deduplicator().ttlMs).toBe(24 * HOUR);
  });

  it("holds its size bound over many operations and emits one tombstone per eviction", () => {
    const d = new Deduplicator({ ttlMs: HOUR, maxEntries: 20_000 });
    let tombstones = 0;
    for (let i = 0; i < 60_000; i++) {
      if (!d.seen(`id-${i}`, i)) d.remember(`id-${i}`, i);
      if (i % 1000 === 0) tombstones += d.evictExpired(i).length;
    }
    tombstones += d.evictExpired(60_000).length;
    expect(d.size).toBe(20_000);
    expect(tombstones).toBe(40_000);
  });
});
