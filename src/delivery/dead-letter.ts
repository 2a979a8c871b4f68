import type { RecordHeaders } from "../contracts/codec.js";

/**
 * Dead letters follow the Kafka Connect convention (docs/design.md §3): the raw key, value, headers and
 * timestamp of the source record stay as they were, so the record can be inspected and replayed
 * byte for byte; error context goes into added headers. Which failures become dead letters:
 * undecodable or invalid records (stage decode/validate) and per-item model errors (stage model:
 * TOKENIZE_FAILED, INFERENCE_FAILED). Bad input the model rejects (EMPTY_TEXT) and expired requests
 * get a result instead (see result-builder.ts), so every record is exactly one of result, dead
 * letter or counted duplicate.
 */
export type DeadLetterStage = "decode" | "validate" | "model" | "deliver";

export interface DeadLetterSource {
  topic: string;
  partition: number;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers?: RecordHeaders;
  /** Kafka record timestamp, epoch ms as a string (kafkajs convention). */
  timestamp: string;
}

export interface DeadLetterError {
  code: string;
  /** Must not contain payload text; cut to MAX_ERROR_MESSAGE_CHARS. */
  message: string;
  stage: DeadLetterStage;
  /**
   * More context headers, named without the `sluice.error.` prefix: a tensor that does not fit the
   * model carries `input`, `expected-shape`/`actual-shape` or `expected-datatype`/`actual-datatype`.
   */
  context?: Record<string, string>;
}

export interface DeadLetterRecord {
  key: Buffer | null;
  value: Buffer | null;
  headers: RecordHeaders;
  timestamp: string;
}

export const DEAD_LETTER_HEADERS = {
  code: "sluice.error.code",
  message: "sluice.error.message",
  stage: "sluice.error.stage",
  topic: "sluice.error.topic",
  partition: "sluice.error.partition",
  offset: "sluice.error.offset",
  /** Set when the value was cut to fit `maxBytes`: the original value length in bytes. */
  valueTruncated: "sluice.error.value-truncated",
} as const;

export const MAX_ERROR_MESSAGE_CHARS = 1000;

export interface DeadLetterLimits {
  /**
   * Most bytes of key + value + header names and values. A bigger source value is cut to its first
   * bytes and `sluice.error.value-truncated` says the original length, so the dead letter fits a
   * transaction and the broker's message size limit. Default: no limit.
   */
  maxBytes?: number;
}

export function buildDeadLetter(
  source: DeadLetterSource,
  error: DeadLetterError,
  limits: DeadLetterLimits = {},
): DeadLetterRecord {
  const headers: RecordHeaders = {};
  for (const [name, value] of Object.entries(source.headers ?? {})) {
    // A replayed dead letter gets fresh error context, not two competing sets.
    if (value !== undefined && !name.startsWith("sluice.error.")) headers[name] = value;
  }
  Object.assign(headers, errorHeaders(source, error));
  let value = source.value;
  const maxBytes = limits.maxBytes;
  if (maxBytes !== undefined && value !== null) {
    const original = value.length;
    const fixed = (source.key?.length ?? 0) + headerBytes(headers);
    if (fixed + original > maxBytes) {
      headers[DEAD_LETTER_HEADERS.valueTruncated] = String(original);
      const room = maxBytes - fixed - DEAD_LETTER_HEADERS.valueTruncated.length - String(original).length;
      value = value.subarray(0, Math.max(0, Math.min(original, room)));
    }
  }
  return { key: source.key, value, headers, timestamp: source.timestamp };
}

/**
 * A dead letter with error headers only: no key, no value, none of the source's headers, producer
 * time. It replaces outputs the broker refused as too large even alone, so the record still ends as
 * exactly one dead letter; `droppedBytes` (the refused outputs' size) goes into the value-truncated
 * header.
 */
export function buildPayloadlessDeadLetter(
  source: Pick<DeadLetterSource, "topic" | "partition" | "offset">,
  error: DeadLetterError,
  droppedBytes: number,
): Omit<DeadLetterRecord, "timestamp"> {
  return {
    key: null,
    value: null,
    headers: { ...errorHeaders(source, error), [DEAD_LETTER_HEADERS.valueTruncated]: String(droppedBytes) },
  };
}

/** The one place the error-context headers are written. */
function errorHeaders(
  source: Pick<DeadLetterSource, "topic" | "partition" | "offset">,
  error: DeadLetterError,
): Record<string, string> {
  const message =
    error.message.length > MAX_ERROR_MESSAGE_CHARS
      ? `${error.message.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…`
      : error.message;
  const context: Record<string, string> = {};
  for (const [name, value] of Object.entries(error.context ?? {})) context[`sluice.error.${name}`] = value;
  return {
    ...context,
    [DEAD_LETTER_HEADERS.code]: error.code,
    [DEAD_LETTER_HEADERS.message]: message,
    [DEAD_LETTER_HEADERS.stage]: error.stage,
    [DEAD_LETTER_HEADERS.topic]: source.topic,
    [DEAD_LETTER_HEADERS.partition]: String(source.partition),
    [DEAD_LETTER_HEADERS.offset]: source.offset,
  };
}

function headerBytes(headers: RecordHeaders): number {
  let n = 0;
  for (const [name, v] of Object.entries(headers)) {
    n += Buffer.byteLength(name);
    for (const x of Array.isArray(v) ? v : [v]) {
      if (x !== undefined && x !== null) n += typeof x === "string" ? Buffer.byteLength(x) : x.length;
    }
  }
  return n;
}
