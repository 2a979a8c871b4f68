import type { RecordHeaders } from "../contracts/codec.js";
import type { RequestSpan } from "../tracing/pipeline-tracer.js";
import type { RememberedId } from "./dedup-segment.js";

/** One record to publish for an input partition (transport-free; the Kafka publishers send it). */
export interface OutboundMessage {
  topic: string;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers?: RecordHeaders;
  /** Target partition; omitted = the default partitioner (by key). */
  partition?: number;
  /** Epoch ms as a string (kafkajs convention); omitted = producer time. */
  timestamp?: string;
}

/**
 * What finishing one input record produced; published when its transaction commits. `outputs` are
 * what subscribers read (a result or a dead letter); `remembered` is the request id the intake
 * remembered for it, which the transaction writes to the partition's dedup changelog in a segment
 * (src/delivery/dedup-changelog.ts; at-least-once mode publishes it only after the outputs are durable).
 */
export interface RecordCompletion {
  outputs: OutboundMessage[];
  /** Undefined for records that remembered no id (undecodable, duplicates). */
  remembered?: RememberedId | undefined;
  outcome: "result" | "dead_letter" | "duplicate";
  status?: "ok" | "expired" | "rejected" | "error" | "fallback";
  /** Set when status is fallback (docs/lanes.md). */
  fallbackReason?: "deadline" | "model_error" | "overload";
  errorCode?: string;
  /** Timestamp of the input record, epoch ms. */
  recordTimestampMs: number;
  /**
   * A backfill run's row: its share of the model's cost. The committer sums these per run into one
   * cost-share record on the runs topic per transaction (src/contracts/run-cost-share.ts).
   */
  runCost?: { runId: string; items: number; tokens: number; cpuMs: number };
  /** For dead letters: which record it was, for the dead-letter log (hashed there; never the value). */
  deadLetter?: DeadLetterNote;
  /**
   * The request's span (docs/observability.md, "Tracing"): the committer's transaction ends it at
   * the commit, or it is aborted when the record is given up. The do-nothing span when tracing is off.
   */
  span?: RequestSpan;
}

/** Where a dead-lettered record came from: its offset, failing stage, and request id or Kafka key. */
export interface DeadLetterNote {
  offset: string;
  stage: string;
  /** The decoded request id, when the record got that far. */
  requestId?: string;
  /** The record's Kafka key as UTF-8 (when it has one). */
  key?: string;
}

/** Estimated size of one record on the wire: key + value + headers + a small fixed overhead. */
export function estimateBytes(m: OutboundMessage): number {
  let n = 64 + byteLength(m.key) + byteLength(m.value); // per-record overhead (varints, attributes) is small
  const headers = m.headers;
  if (headers === undefined) return n;
  // for…in, not Object.entries: this runs several times per record and must not allocate.
  for (const k in headers) {
    const v = headers[k];
    n += Buffer.byteLength(k);
    if (Array.isArray(v)) for (const x of v) n += byteLength(x);
    else n += byteLength(v);
  }
  return n;
}

/** Estimated bytes of everything a completion publishes. */
export function completionBytes(c: RecordCompletion): number {
  let n = 0;
  for (const m of c.outputs) n += estimateBytes(m);
  // Its share of a segment: the id, quotes, comma and expiry.
  if (c.remembered !== undefined) n += byteLength(c.remembered.id) + 20;
  return n;
}

function byteLength(v: Buffer | string | null | undefined): number {
  if (v === null || v === undefined) return 0;
  return typeof v === "string" ? Buffer.byteLength(v) : v.length;
}
