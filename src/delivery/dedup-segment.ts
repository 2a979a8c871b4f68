import { randomBytes } from "node:crypto";

/**
 * A dedup segment: the request ids one transaction remembered for one input partition, written as
 * one record of the partition's compacted changelog (docs/exactly-once.md, "The dedup changelog").
 * Before segments every id was a record of its own (key = id, value = expiry): a changelog record
 * per result, which the broker stored, replicated, compacted and the restore read back one by one.
 * A segment carries a transaction's ids and expiries in one value, so the changelog gets one record
 * per transaction and 16 KiB of ids (`MAX_SEGMENT_BYTES`), and a tombstone for the segment
 * once none of its ids is live there any more (`Deduplicator`).
 *
 * Key: 0xFF, "sluice.dedup-segment/", the transaction's consumer offset and 12 random hex digits.
 * 0xFF never occurs in UTF-8, so the key cannot collide with a request id (the legacy records'
 * key); the random part keeps two segments apart even when an offset is committed twice (a group
 * whose offsets were reset), so a later segment never replaces an earlier one by compaction.
 *
 * Value (UTF-8 JSON): `{"format":"sluice.dedup-segment/1","ids":[...],"expiresAtMs":[...]}`, the
 * ids in the order they were remembered and each one's expiry in epoch ms.
 */
export const DEDUP_SEGMENT_KEY_PREFIX: Buffer = Buffer.concat([
  Buffer.from([0xff]),
  Buffer.from("sluice.dedup-segment/"),
]);

export const DEDUP_SEGMENT_FORMAT = "sluice.dedup-segment/1";

/**
 * Most bytes of ids and expiries in one segment value: a transaction that remembered more writes
 * several segments. Far below any broker's record size limit (1 MiB by default), so a segment is
 * not refused as too large even by a changelog topic whose `max.message.bytes` was lowered; 16 KiB
 * holds about 280 36-character UUIDs, a seventh of a full transaction's records (2,000).
 */
export const MAX_SEGMENT_BYTES = 16 * 1024;

/** One remembered id and its expiry, as the intake remembered it and a segment stores it. */
export interface RememberedId {
  id: string;
  expiresAtMs: number;
}

/** A fresh segment key for a transaction committing consumer offset `nextOffset`. */
export function dedupSegmentKey(nextOffset: string): Buffer {
  return Buffer.concat([
    DEDUP_SEGMENT_KEY_PREFIX,
    Buffer.from(`${nextOffset}.${randomBytes(6).toString("hex")}`),
  ]);
}

/** True when a changelog record's key is a segment's. */
export function isDedupSegmentKey(key: Buffer): boolean {
  return (
    key.length > DEDUP_SEGMENT_KEY_PREFIX.length &&
    key.subarray(0, DEDUP_SEGMENT_KEY_PREFIX.length).equals(DEDUP_SEGMENT_KEY_PREFIX)
  );
}

/**
 * `entries` cut into segment values of at most `maxBytes` each (an id longer than that still gets
 * a segment of its own), in order.
 */
export function encodeDedupSegments(
  entries: readonly RememberedId[],
  maxBytes: number = MAX_SEGMENT_BYTES,
): { value: string; entries: RememberedId[] }[] {
  const out: { value: string; entries: RememberedId[] }[] = [];
  let part: RememberedId[] = [];
  let bytes = 0;
  for (const e of entries) {
    // The id's UTF-8 length (an upper bound of its JSON's, but for escapes), quotes, comma, expiry.
    const size = Buffer.byteLength(e.id) + 20;
    if (part.length > 0 && bytes + size > maxBytes) {
      out.push({ value: encodeValue(part), entries: part });
      part = [];
      bytes = 0;
    }
    part.push(e);
    bytes += size;
  }
  if (part.length > 0) out.push({ value: encodeValue(part), entries: part });
  return out;
}

function encodeValue(entries: readonly RememberedId[]): string {
  return JSON.stringify({
    format: DEDUP_SEGMENT_FORMAT,
    ids: entries.map((e) => e.id),
    expiresAtMs: entries.map((e) => Math.trunc(e.expiresAtMs)),
  });
}

/** A segment value's entries, or null when it is not one this version can read. */
export function decodeDedupSegment(value: Buffer | string): RememberedId[] | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof value === "string" ? value : value.toString("utf8"));
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null) return null;
  const { format, ids, expiresAtMs } = parsed as Record<string, unknown>;
  if (format !== DEDUP_SEGMENT_FORMAT || !Array.isArray(ids) || !Array.isArray(expiresAtMs)) return null;
  if (ids.length !== expiresAtMs.length) return null;
  const out: RememberedId[] = [];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    const exp = expiresAtMs[i];
    if (typeof id !== "string" || !Number.isSafeInteger(exp)) return null;
    out.push({ id, expiresAtMs: exp as number });
  }
  return out;
}
