import type { InferenceRequest } from "./inference.js";

/**
 * What decoding one request record gives, shared by every request codec (request-codec.ts for
 * json/avro/avro-registry, v2-json-codec.ts for the Open Inference Protocol).
 */
export type DecodeFailureCode =
  | "DECODE_FAILED"
  | "SCHEMA_VIOLATION"
  | "MISSING_ID"
  | "PAYLOAD_TOO_LARGE"
  | "WRONG_MAGIC_BYTE"
  | "UNKNOWN_SCHEMA_ID"
  | "SCHEMA_UNRESOLVABLE"
  | "MODEL_MISMATCH";

/** Failures of reading the bytes (dead-letter stage `decode`); the others are stage `validate`. */
export const DECODE_STAGE_CODES: ReadonlySet<DecodeFailureCode> = new Set([
  "DECODE_FAILED",
  "WRONG_MAGIC_BYTE",
  "UNKNOWN_SCHEMA_ID",
  "SCHEMA_UNRESOLVABLE",
]);

/** Smallest accepted `deadlineMs` (see the file comment): 1e11 ms = 1973-03-03T09:46:40Z. */
export const MIN_DEADLINE_MS = 100_000_000_000;

export type DecodeOutcome =
  | { ok: true; request: InferenceRequest }
  | { ok: false; code: DecodeFailureCode; message: string };

/** Checks an optional epoch-milliseconds deadline; undefined when it is fine (absent, null or valid). */
export function validateDeadline(deadlineMs: unknown, field: string): DecodeOutcome | undefined {
  if (deadlineMs === undefined || deadlineMs === null) return undefined;
  if (typeof deadlineMs !== "number" || !Number.isFinite(deadlineMs)) {
    return fail(
      "SCHEMA_VIOLATION",
      `"${field}" is ${describe(deadlineMs)}; expected epoch milliseconds (a finite number) or null`,
    );
  }
  if (deadlineMs < MIN_DEADLINE_MS) {
    return fail(
      "SCHEMA_VIOLATION",
      `"${field}" is ${deadlineMs}, which is not epoch milliseconds (values below ${MIN_DEADLINE_MS} are before 1973); ` +
        "if it is epoch seconds, multiply by 1000",
    );
  }
  return undefined;
}

export function fail(code: DecodeFailureCode, message: string): DecodeOutcome {
  return { ok: false, code, message };
}

/** Type description for messages; deliberately never echoes the value itself. */
export function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" && !Number.isFinite(value)) return "a non-finite number";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

export function truncateForMessage(s: string, max = 120): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
}
