import type { RecordHeaders } from "../contracts/codec.js";

/**
 * Dead letters follow the Kafka Connect convention (DESIGN.md §3): the raw key, value, headers and
 * timestamp of the source record stay as they were, so the record can be inspected and replayed
 * byte for byte; error context goes into added headers. Which failures become dead letters:
 * undecodable or invalid records (stage decode/validate) and per-item model errors (stage model:
 * TOKENIZE_FAILED, INFERENCE_FAILED). Bad input the model rejects (EMPTY_TEXT) and expired requests
 * get a result instead (see result-builder.ts), so every record is exactly one of result, dead
 * letter or counted duplicate.
 */
export type DeadLetterStage = "decode" | "validate" | "dedup" | "model" | "deliver";

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
} as const;

export const MAX_ERROR_MESSAGE_CHARS = 1000;

export function buildDeadLetter(source: DeadLetterSource, error: DeadLetterError): DeadLetterRecord {
  const headers: RecordHeaders = {};
  for (const [name, value] of Object.entries(source.headers ?? {})) {
    // A replayed dead letter gets fresh error context, not two competing sets.
    if (value !== undefined && !name.startsWith("sluice.error.")) headers[name] = value;
  }
  const message =
    error.message.length > MAX_ERROR_MESSAGE_CHARS
      ? `${error.message.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…`
      : error.message;
  headers[DEAD_LETTER_HEADERS.code] = error.code;
  headers[DEAD_LETTER_HEADERS.message] = message;
  headers[DEAD_LETTER_HEADERS.stage] = error.stage;
  headers[DEAD_LETTER_HEADERS.topic] = source.topic;
  headers[DEAD_LETTER_HEADERS.partition] = String(source.partition);
  headers[DEAD_LETTER_HEADERS.offset] = source.offset;
  return { key: source.key, value: source.value, headers, timestamp: source.timestamp };
}
