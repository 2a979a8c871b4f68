import { avroType } from "./avro-schemas.js";
import { type Codec, codecFromHeaders, contentTypeFor, isCodec, type RecordHeaders } from "./codec.js";
import type { InferenceRequest } from "./inference.js";

/**
 * Decoding and encoding of inference requests (schemas/inference-request.avsc).
 *
 * Decisions:
 * - A missing or empty `id` is MISSING_ID even when the Kafka key is set: the key is a routing hint
 *   and silently promoting it would make dedup depend on producer partitioning choices.
 * - Unknown JSON fields are ignored (forward compatibility: new fields get defaults, DESIGN.md §4);
 *   known fields are type-checked strictly.
 * - `text: ""` decodes fine; the model rejects it later as EMPTY_TEXT (a result with status rejected).
 * - A `deadlineMs` below `MIN_DEADLINE_MS` (1e11, i.e. before 1973-03-03 in milliseconds, or the year
 *   5138 read as seconds) is SCHEMA_VIOLATION: such values are epoch seconds by mistake, and taken as
 *   milliseconds they would silently expire every request.
 * - Error messages name the field and the expected type, never the payload text.
 */
export type DecodeFailureCode = "DECODE_FAILED" | "SCHEMA_VIOLATION" | "MISSING_ID" | "PAYLOAD_TOO_LARGE";

/** Smallest accepted `deadlineMs` (see the file comment): 1e11 ms = 1973-03-03T09:46:40Z. */
export const MIN_DEADLINE_MS = 100_000_000_000;

export type DecodeOutcome =
  | { ok: true; request: InferenceRequest }
  | { ok: false; code: DecodeFailureCode; message: string };

export interface RequestDecoderOptions {
  /** Codec for records without a `content-type` header (the topic's configured codec). */
  defaultCodec: Codec;
  /** Records whose value is larger than this many bytes are rejected as PAYLOAD_TOO_LARGE. */
  maxMessageBytes: number;
}

export class RequestDecoder {
  private readonly defaultCodec: Codec;
  private readonly maxMessageBytes: number;

  constructor(opts: RequestDecoderOptions) {
    if (!isCodec(opts.defaultCodec)) {
      throw new Error(
        `RequestDecoder: defaultCodec must be "json" or "avro", got ${String(opts.defaultCodec)}`,
      );
    }
    if (!Number.isInteger(opts.maxMessageBytes) || opts.maxMessageBytes <= 0) {
      throw new Error(
        `RequestDecoder: maxMessageBytes must be a positive integer, got ${String(opts.maxMessageBytes)}`,
      );
    }
    this.defaultCodec = opts.defaultCodec;
    this.maxMessageBytes = opts.maxMessageBytes;
    // Compile the schema now so a broken install fails at startup, not on the first record.
    avroType("inference-request");
  }

  /** Never throws for bad input; the key is accepted for API symmetry but not used (see file comment). */
  decode(value: Buffer | null, headers?: RecordHeaders, _key?: Buffer | null): DecodeOutcome {
    if (value === null || value === undefined) {
      return fail("DECODE_FAILED", "record has no value (tombstone); expected an encoded InferenceRequest");
    }
    if (value.length > this.maxMessageBytes) {
      return fail(
        "PAYLOAD_TOO_LARGE",
        `record value is ${value.length} bytes, above maxMessageBytes=${this.maxMessageBytes}; send smaller requests or raise the limit`,
      );
    }
    const selected = codecFromHeaders(headers, this.defaultCodec);
    if ("unsupported" in selected) {
      return fail(
        "DECODE_FAILED",
        `unsupported content-type "${truncateForMessage(selected.unsupported)}"; expected application/json, application/avro or avro/binary`,
      );
    }
    return selected.codec === "json" ? decodeJson(value) : decodeAvro(value);
  }
}

function decodeJson(value: Buffer): DecodeOutcome {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString("utf8"));
  } catch {
    return fail("DECODE_FAILED", `value is not valid JSON (${value.length} bytes); expected a JSON object`);
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    return fail(
      "SCHEMA_VIOLATION",
      `value is JSON ${describe(parsed)}; expected an object with "id" and "text"`,
    );
  }
  return validate(parsed as Record<string, unknown>);
}

function decodeAvro(value: Buffer): DecodeOutcome {
  let decoded: Record<string, unknown>;
  try {
    decoded = avroType("inference-request").fromBuffer(value) as Record<string, unknown>;
  } catch (error) {
    // avsc messages describe the schema position (e.g. "truncated buffer"), not payload content.
    const reason = error instanceof Error ? error.message : String(error);
    return fail(
      "DECODE_FAILED",
      `value is not a valid Avro InferenceRequest (${value.length} bytes): ${truncateForMessage(reason)}; expected the binary encoding of schemas/inference-request.avsc without a container or registry header`,
    );
  }
  return validate(decoded);
}

function validate(obj: Record<string, unknown>): DecodeOutcome {
  const { id, text, deadlineMs, attributes } = obj;
  if (id === undefined || id === null) {
    return fail(
      "MISSING_ID",
      'request has no "id"; expected a non-empty string (also use it as the record key)',
    );
  }
  if (id === "") {
    return fail(
      "MISSING_ID",
      'request "id" is an empty string; expected a non-empty string (also use it as the record key)',
    );
  }
  if (typeof id !== "string") {
    return fail("SCHEMA_VIOLATION", `"id" is ${describe(id)}; expected a non-empty string`);
  }
  if (typeof text !== "string") {
    return fail("SCHEMA_VIOLATION", `"text" is ${describe(text)}; expected a string`);
  }
  if (deadlineMs !== undefined && deadlineMs !== null) {
    if (typeof deadlineMs !== "number" || !Number.isFinite(deadlineMs)) {
      return fail(
        "SCHEMA_VIOLATION",
        `"deadlineMs" is ${describe(deadlineMs)}; expected epoch milliseconds (a finite number) or null`,
      );
    }
    if (deadlineMs < MIN_DEADLINE_MS) {
      return fail(
        "SCHEMA_VIOLATION",
        `"deadlineMs" is ${deadlineMs}, which is not epoch milliseconds (values below ${MIN_DEADLINE_MS} are before 1973); ` +
          "if it is epoch seconds, multiply by 1000",
      );
    }
  }
  if (attributes !== undefined && attributes !== null) {
    if (typeof attributes !== "object" || Array.isArray(attributes)) {
      return fail(
        "SCHEMA_VIOLATION",
        `"attributes" is ${describe(attributes)}; expected a map of strings or null`,
      );
    }
    for (const [name, v] of Object.entries(attributes)) {
      if (typeof v !== "string") {
        return fail(
          "SCHEMA_VIOLATION",
          `"attributes.${truncateForMessage(name)}" is ${describe(v)}; expected every attribute value to be a string`,
        );
      }
    }
  }
  const request: InferenceRequest = {
    id,
    text,
    deadlineMs: (deadlineMs as number | null | undefined) ?? null,
    attributes: (attributes as Record<string, string> | null | undefined) ?? null,
  };
  return { ok: true, request };
}

/** Encodes a request for producers, the demo and tests. Sets `content-type`. */
export function encodeRequest(
  req: InferenceRequest,
  codec: Codec,
): { value: Buffer; headers: Record<string, string> } {
  const normalized = {
    id: req.id,
    text: req.text,
    deadlineMs: req.deadlineMs ?? null,
    attributes: req.attributes ?? null,
  };
  const value =
    codec === "avro"
      ? avroType("inference-request").toBuffer(normalized)
      : Buffer.from(JSON.stringify(normalized), "utf8");
  return { value, headers: { "content-type": contentTypeFor(codec) } };
}

function fail(code: DecodeFailureCode, message: string): DecodeOutcome {
  return { ok: false, code, message };
}

/** Type description for messages; deliberately never echoes the value itself. */
function describe(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" && !Number.isFinite(value)) return "a non-finite number";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function truncateForMessage(s: string, max = 120): string {
  return s.length <= max ? s : `${s.slice(0, max)}…`;
}
