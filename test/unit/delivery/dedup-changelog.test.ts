import { describe, expect, it } from "vitest";
import { DedupChangelog } from "../../../src/delivery/dedup-changelog.js";
import {
  DEDUP_SEGMENT_FORMAT,
  DEDUP_SEGMENT_KEY_PREFIX,
  decodeDedupSegment,
  dedupSegmentKey,
  encodeDedupSegments,
  isDedupSegmentKey,
  MAX_SEGMENT_BYTES,
} from "../../../src/delivery/dedup-segment.js";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import type { OutboundMessage, RecordCompletion } from "../../../src/delivery/outbound-message.js";
import { OFFSET_CHECKPOINT_KEY } from "../../../src/delivery/transaction-records.js";

const completion = (remembered?: { id: string; expiresAtMs: number }): RecordCompletion => ({
  outputs: [],
  outcome: remembered ? "result" : "duplicate",
  recordTimestampMs: 0,
  ...(remembered ? { remembered } : {}),
});

const segmentIds = (records: readonly OutboundMessage[]) =>
  records
    .filter((r) => Buffer.isBuffer(r.key) && isDedupSegmentKey(r.key) && r.value !== null)
    .map((r) => (decodeDedupSegment(r.value as string) ?? []).map((e) => e.id));

describe("dedup segments", () => {
  it("round-trip ids (any UTF-8, quotes, newlines) and expiries in order", () => {
    const entries = [
      { id: "r-1", expiresAtMs: 1_767_225_600_000 },
      { id: 'with "quotes"\nand a newline', expiresAtMs: 1_767_225_600_004 },
      { id: "ünïcødé ✓", expiresAtMs: 1 },
    ];
    const [segment, ...rest] = encodeDedupSegments(entries);
    expect(rest).toEqual([]);
    expect(JSON.parse(segment?.value as string).format).toBe(DEDUP_SEGMENT_FORMAT);
    expect(decodeDedupSegment(Buffer.from(segment?.value as string))).toEqual(entries);
  });

  it("cut at MAX_SEGMENT_BYTES; an id longer than that gets a segment of its own", () => {
    const ids = Array.from({ length: 3000 }, (_, i) => ({ id: `${"x".repeat(30)}-${i}`, expiresAtMs: i }));
    const segments = encodeDedupSegments([...ids, { id: "y".repeat(70_000), expiresAtMs: 0 }]);
    for (const s of segments.slice(0, -1))
      expect(Buffer.byteLength(s.value)).toBeLessThanOrEqual(MAX_SEGMENT_BYTES);
    expect(segments.flatMap((s) => s.entries)).toHaveLength(3001);
    expect(segments.at(-1)?.entries).toEqual([{ id: "y".repeat(70_000), expiresAtMs: 0 }]);
    expect(segments.length).toBeGreaterThanOrEqual(3);
  });

  it("refuses what it cannot read: other JSON, other formats, mismatched arrays, non-integer expiries", () => {
    for (const bad of [
      "not json",
      "[]",
      '{"format":"sluice.dedup-segment/2","ids":[],"expiresAtMs":[]}',
      `{"format":"${DEDUP_SEGMENT_FORMAT}","ids":["a"],"expiresAtMs":[]}`,
      `{"format":"${DEDUP_SEGMENT_FORMAT}","ids":["a"],"expiresAtMs":[1.5]}`,
      `{"format":"${DEDUP_SEGMENT_FORMAT}","ids":[1],"expiresAtMs":[1]}`,
    ])
      expect(decodeDedupSegment(bad)).toBeNull();
  });

  it("keys start with 0xFF (never a request id's UTF-8) and differ for the same offset", () => {
    const a = dedupSegmentKey("42");
    const b = dedupSegmentKey("42");
    expect(a[0]).toBe(0xff);
    expect(a.subarray(0, DEDUP_SEGMENT_KEY_PREFIX.length)).toEqual(DEDUP_SEGMENT_KEY_PREFIX);
    expect(a.toString("latin1")).toMatch(/^\xffsluice\.dedup-segment\/42\.[0-9a-f]{12}$/);
    expect(a.equals(b)).toBe(false);
    expect(isDedupSegmentKey(a)).toBe(true);
    expect(isDedupSegmentKey(OFFSET_CHECKPOINT_KEY)).toBe(false);
    expect(isDedupSegmentKey(Buffer.from("sluice.dedup-segment/1.abc"))).toBe(false);
  });
});

describe("DedupChangelog", () => {
  function setup() {
    let now = 0;
    const dedup = new Deduplicator({ ttlMs: 100, maxEntries: 1000 });
    const changelog = new DedupChangelog({ topic: "cl", partition: 3, dedup: () => dedup, now: () => now });
    return { dedup, changelog, at: (ms: number) => (now = ms) };
  }

  it("writes a transaction's remembered ids as one segment on the changelog partition; duplicates add nothing", () => {
    const { dedup, changelog } = setup();
    const prepared = changelog.prepare("10", [
      completion(dedup.remember("a", 0)),
      completion(),
      completion(dedup.remember("b", 0)),
    ]);
    expect(prepared.records).toHaveLength(1);
    expect(prepared.records[0]).toMatchObject({ topic: "cl", partition: 3 });
    expect(segmentIds(prepared.records)).toEqual([["a", "b"]]);
    expect(changelog.prepare("11", [completion()]).records).toEqual([]);
  });

  it("after the commit the deduplicator knows the segment: its tombstone goes out once its ids expired", () => {
    const { dedup, changelog, at } = setup();
    const first = changelog.prepare("1", [completion(dedup.remember("a", 0))]);
    first.committed();
    at(150); // a expired at 100
    const next = changelog.prepare("2", [completion(dedup.remember("b", 150))]);
    expect(segmentIds(next.records)).toEqual([["b"]]);
    const tombstones = next.records.filter((r) => r.value === null);
    expect(tombstones.map((r) => r.key)).toEqual([first.records[0]?.key]);
  });

  it("an aborted transaction's segments never count and its tombstones go out with the next one", () => {
    const { dedup, changelog, at } = setup();
    changelog.prepare("1", [completion(dedup.remember("a", 0))]).committed();
    at(150);
    const aborted = changelog.prepare("2", [completion(dedup.remember("b", 150))]);
    const tombstone = aborted.records.find((r) => r.value === null)?.key;
    expect(tombstone).toBeDefined();
    aborted.aborted();
    const retried = changelog.prepare("2", [completion({ id: "b", expiresAtMs: 250 })]);
    expect(retried.records.filter((r) => r.value === null).map((r) => r.key)).toEqual([tombstone]);
    retried.committed();
    at(300); // b expired: its segment is the retried one, not the aborted one
    const later = changelog.prepare("3", []);
    expect(later.records.map((r) => r.key)).toEqual([retried.records[0]?.key]);
  });
});
