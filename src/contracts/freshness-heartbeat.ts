import { avroType } from "./avro-schemas.js";

/**
 * Per-partition freshness report (schemas/freshness-heartbeat.avsc, Avro only). Downstream readers
 * use `completeUpToMs` to know that every request up to that event time has a committed outcome.
 */
export interface FreshnessHeartbeat {
  instanceId: string;
  groupId: string;
  topic: string;
  partition: number;
  /** Next offset to read, as committed by the last transaction (-1 if none yet). */
  committedOffset: number;
  /** Record timestamp (epoch ms) of the last request covered by a commit; null before the first. */
  lastCommittedEventTimestampMs: number | null;
  lagRecords: number;
  lagSeconds: number;
  emittedAtMs: number;
  /** Every request with a record timestamp ≤ this (epoch ms) has a committed outcome; null if unknown. */
  completeUpToMs: number | null;
}

/** The freshness topic when `topics.freshness` is not set (the config default and `readFreshness`'s). */
export const DEFAULT_FRESHNESS_TOPIC = "sluice.freshness";

export const HEARTBEAT_CONTENT_TYPE = "application/avro";

export function encodeHeartbeat(hb: FreshnessHeartbeat): Buffer {
  return avroType("freshness-heartbeat").toBuffer({
    ...hb,
    lastCommittedEventTimestampMs: hb.lastCommittedEventTimestampMs ?? null,
    completeUpToMs: hb.completeUpToMs ?? null,
  });
}

/** Throws an Error (from avsc) when `buf` is not a heartbeat. */
export function decodeHeartbeat(buf: Buffer): FreshnessHeartbeat {
  const r = avroType("freshness-heartbeat").fromBuffer(buf) as FreshnessHeartbeat;
  return { ...r };
}
