import { avroType } from "./avro-schemas.js";
import { type Codec, codecFromHeaders, contentTypeFor, isCodec, type RecordHeaders } from "./codec.js";
import {
  type DecodeOutcome,
  describe,
  fail,
  truncateForMessage,
  validateDeadline,
} from "./decode-outcome.js";
import type { InferenceRequest } from "./inference.js";
import { frameRegistryPayload, parseRegistryFrame, registrySchemaIdOf } from "./registry-wire.js";
import type { RequestWriterSchemas } from "./request-writer-schemas.js";
import { decodeV2Request, encodeV2Request } from "./v2-json-codec.js";

/**
 * Decoding and encoding of inference requests (schemas/inference-request.avsc).
 *
 * Decisions:
 * - A missing or empty `id` is MISSING_ID even when the Kafka key is set: the key is a routing hint
 *   and silently promoting it would make dedup depend on producer partitioning choices.
 * - Unknown JSON fields are ignored (forward compatibility: new fields get defaults, docs/design.md §4);
 *   known fields are type-checked strictly.
 * - `text: ""` decodes fine; the model rejects it later as EMPTY_TEXT (a result with status rejected).
 * - A `deadlineMs` below `MIN_DEADLINE_MS` (1e11, i.e. before 1973-03-03 in milliseconds, or the year
 *   5138 read as seconds) is SCHEMA_VIOLATION: such values are epoch seconds by mistake, and taken as
 *   milliseconds they would silently expire every request.
 * - Error messages name the field and the expected type, never the payload text.
 * - V2 JSON (Open Inference Protocol) requests are decoded by v2-json-codec.ts.
 */
export {
  DECODE_STAGE_CODES,
  type DecodeFailureCode,
  type DecodeOutcome,
  MIN_DEADLINE_MS,
} from "./decode-outcome.js";

export interface RequestDecoderOptions {
  /** Codec for records without a `content-type` header (the topic's configured codec). */
  defaultCodec: Codec;
  /** Records whose value is larger than this many bytes are rejected as PAYLOAD_TOO_LARGE. */
  maxMessageBytes: number;
  /**
   * Writer schemas of registry-framed (`avro-registry`) records; required when that is the default
   * codec. Without it a record whose content-type names the registry format is a DECODE_FAILED.
   */
  writerSchemas?: RequestWriterSchemas;
  /** `model.name`: V2 requests whose `mlserver-model` header names another model are MODEL_MISMATCH. */
  servedModel?: string;
}

export class RequestDecoder {
  private readonly defaultCodec: Codec;
  private readonly maxMessageBytes: number;
  private readonly writerSchemas: RequestWriterSchemas | undefined;
  private readonly servedModel: string | undefined;

  constructor(opts: RequestDecoderOptions) {
    if (!isCodec(opts.defaultCodec)) {
      throw new Error(
        `RequestDecoder: defaultCodec must be "json", "avro", "avro-registry" or "v2-json", got ${String(opts.defaultCodec)}`,
      );
    }
    if (opts.defaultCodec === "avro-registry" && opts.writerSchemas === undefined) {
      throw new Error("RequestDecoder: defaultCodec avro-registry needs writerSchemas (a schema registry)");
    }
    this.writerSchemas = opts.writerSchemas;
    this.servedModel = opts.servedModel;
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
    switch (selected.codec) {
      case "json":
        return decodeJson(value);
      case "avro":
        return decodeAvro(value);
      case "avro-registry":
        return this.decodeRegistry(value);
      case "v2-json":
        return decodeV2Request(value, headers, this.servedModel);
    }
  }

  /**
   * Registry ids of writer schemas these records need and that are not loaded yet: `decode` may only
   * be called for them after `loadSchemas` succeeded. Empty when no registry is configured.
   */
  schemaIdsToLoad(records: Iterable<{ value: Buffer | null; headers?: RecordHeaders }>): number[] {
    const writerSchemas = this.writerSchemas;
    if (writerSchemas === undefined) return [];
    const ids: number[] = [];
    for (const r of records) {
      const selected = codecFromHeaders(r.headers, this.defaultCodec);
      if (!("codec" in selected) || selected.codec !== "avro-registry") continue;
      const id = registrySchemaIdOf(r.value);
      if (id !== undefined) ids.push(id);
    }
    return writerSchemas.missing(ids);
  }

  /** Looks writer schemas up in the registry; rejects (retriable) when it cannot answer. */
  loadSchemas(schemaIds: number[]): Promise<void> {
    return this.writerSchemas?.load(schemaIds) ?? Promise.resolve();
  }

  private decodeRegistry(value: Buffer): DecodeOutcome {
    if (this.writerSchemas === undefined) {
      return fail(
        "DECODE_FAILED",
        "record is in the schema registry wire format but no schema registry is configured; set schemaRegistry.url",
      );
    }
    const frame = parseRegistryFrame(value);
    if (!frame.ok) {
      return frame.reason === "too-short"
        ? fail(
            "DECODE_FAILED",
            `value is ${value.length} bytes, too short for the schema registry wire format (magic byte 0, 4-byte schema id, Avro binary)`,
          )
        : fail(
            "WRONG_MAGIC_BYTE",
            `value starts with byte ${frame.magicByte}, expected magic byte 0 of the schema registry wire format; was it written by a registry serializer?`,
          );
    }
    const entry = this.writerSchemas.entry(frame.schemaId);
    if (entry === undefined) {
      throw new Error(
        `RequestDecoder: writer schema ${frame.schemaId} was not loaded; call loadSchemas(schemaIdsToLoad(...)) first`,
      );
    }
    if (!entry.ok) return fail(entry.code, entry.message);
    let decoded: Record<string, unknown>;
    try {
      decoded = entry.reader.fromBuffer(frame.payload, entry.resolver) as Record<string, unknown>;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      return fail(
        "DECODE_FAILED",
        `value is not valid Avro for its writer schema ${frame.schemaId} (${value.length} bytes): ${truncateForMessage(reason)}`,
      );
    }
    return validate(decoded);
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
  const deadlineProblem = validateDeadline(deadlineMs, "deadlineMs");
  if (deadlineProblem !== undefined) return deadlineProblem;
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

/**
 * Encodes a request for producers, the demo and tests. Sets `content-type`. For `avro-registry`,
 * `registrySchemaId` is the registry id of schemas/inference-request.avsc (producers usually use
 * their registry client's serializer instead).
 */
export function encodeRequest(
  req: InferenceRequest,
  codec: Codec,
  registrySchemaId?: number,
): { value: Buffer; headers: Record<string, string> } {
  const normalized = {
    id: req.id,
    text: req.text,
    deadlineMs: req.deadlineMs ?? null,
    attributes: req.attributes ?? null,
  };
  if (codec === "v2-json") return encodeV2Request(req);
  if (req.tensors) {
    throw new Error(`encodeRequest: a request with tensors needs the v2-json codec, not ${codec}`);
  }
  let value: Buffer;
  if (codec === "json") value = Buffer.from(JSON.stringify(normalized), "utf8");
  else value = avroType("inference-request").toBuffer(normalized);
  if (codec === "avro-registry") {
    if (registrySchemaId === undefined) {
      throw new Error("encodeRequest: avro-registry needs the registry id of the request schema");
    }
    value = frameRegistryPayload(registrySchemaId, value);
  }
  return { value, headers: { "content-type": contentTypeFor(codec) } };
}
