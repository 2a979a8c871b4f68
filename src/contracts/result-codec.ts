import { avroType } from "./avro-schemas.js";
import { type Codec, codecFromHeaders, contentTypeFor, isCodec, type RecordHeaders } from "./codec.js";
import type { FallbackReason, InferenceOutput, InferenceResult, ResultStatus } from "./inference.js";
import { frameRegistryPayload } from "./registry-wire.js";
import { encodeV2Result } from "./v2-json-codec.js";

/**
 * Encoding of results (schemas/inference-result.avsc). JSON carries embeddings as plain numbers;
 * Avro carries them as float32, so an Avro round trip equals `Math.fround` of each component.
 * Both codecs produce the same normalised shape: `truncated` defaults to false, `error` to null.
 */
export interface ResultEncoderOptions {
  /** Codec of the results topic. */
  codec: Codec;
  /**
   * `avro-registry` only: the registry id under which schemas/inference-result.avsc is registered for
   * the results topic (registered at start-up, see src/registry/). Results are framed with it.
   */
  registrySchemaId?: number;
}

/**
 * An encoded result as the producer takes it: its value's bytes (JSON and V2 JSON as UTF-8, Avro as
 * the codec's bytes) and headers. A Buffer, not a JSON result's text: the value waits for its
 * transaction's commit, and a Buffer's bytes (pooled, outside V8's heap) are not copied by each young
 * collection it lives through, as a string's are (BENCHMARKS.md, "Result bytes off the heap").
 */
export interface EncodedResult {
  value: Buffer;
  headers: Record<string, string>;
}

export class ResultEncoder {
  private readonly codec: Codec;
  private readonly headers: Readonly<Record<string, string>>;
  private readonly registrySchemaId: number | undefined;

  constructor(opts: ResultEncoderOptions) {
    if (!isCodec(opts.codec)) {
      throw new Error(
        `ResultEncoder: codec must be "json", "avro", "avro-registry" or "v2-json", got ${String(opts.codec)}`,
      );
    }
    if (opts.codec === "avro-registry" && !Number.isInteger(opts.registrySchemaId)) {
      throw new Error("ResultEncoder: codec avro-registry needs the registry id of the result schema");
    }
    this.registrySchemaId = opts.registrySchemaId;
    this.codec = opts.codec;
    // One frozen object shared by every result: readers copy it before adding headers (run id, trace).
    this.headers = Object.freeze({ "content-type": contentTypeFor(opts.codec) });
    avroType("inference-result");
  }

  encode(result: InferenceResult): EncodedResult {
    if (this.codec === "v2-json") return encodeV2Result(result);
    const headers = this.headers as Record<string, string>;
    if (this.codec === "avro") {
      return { value: avroType("inference-result").toBuffer(toAvro(result)), headers };
    }
    if (this.codec === "avro-registry") {
      const payload = avroType("inference-result").toBuffer(toAvro(result));
      return { value: frameRegistryPayload(this.registrySchemaId as number, payload), headers };
    }
    return { value: Buffer.from(JSON.stringify(normalize(result)), "utf8"), headers };
  }
}

/**
 * Decodes a result for downstream clients and tests. The `content-type` header picks the codec;
 * without it `fallback` applies (default json). Throws an Error naming the problem on bad input.
 */
export function decodeResult(
  value: Buffer,
  headers?: RecordHeaders,
  fallback: Codec = "json",
): InferenceResult {
  const selected = codecFromHeaders(headers, fallback);
  if ("unsupported" in selected) {
    throw new Error(
      `decodeResult: unsupported content-type "${selected.unsupported}"; expected JSON or Avro`,
    );
  }
  if (selected.codec === "v2-json") {
    throw new Error("decodeResult: the value is a V2 inference response; read it with decodeV2Response");
  }
  if (selected.codec === "avro-registry") {
    throw new Error(
      "decodeResult: the value is in the schema registry wire format; decode it with your registry client (e.g. @kafkajs/confluent-schema-registry `decode`)",
    );
  }
  if (selected.codec === "avro") {
    return fromAvro(avroType("inference-result").fromBuffer(value) as AvroResult);
  }
  const parsed = JSON.parse(value.toString("utf8")) as unknown;
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new Error("decodeResult: expected a JSON object");
  }
  const obj = parsed as InferenceResult;
  if (typeof obj.id !== "string" || !STATUSES.has(obj.status)) {
    throw new Error('decodeResult: JSON result lacks a string "id" or a valid "status"');
  }
  return normalize(obj);
}

const STATUSES = new Set<ResultStatus>(["ok", "expired", "rejected", "error", "fallback"]);

interface AvroOutput {
  embedding: number[] | null;
  label: string | null;
  scores: Record<string, number> | null;
}

interface AvroResult
  extends Omit<InferenceResult, "output" | "truncated" | "error" | "fallbackReason" | "runId"> {
  output: AvroOutput | null;
  truncated: boolean;
  error: { code: string; message: string } | null;
  fallbackReason: string | null;
  runId: string | null;
}

function normalizeOutput(output: InferenceOutput | null | undefined): InferenceOutput | null {
  if (output === null || output === undefined) return null;
  if ("tensors" in output && output.tensors !== undefined) return { tensors: output.tensors };
  if (output.embedding !== undefined && output.embedding !== null) {
    // Typed arrays would serialise as objects in JSON and fail avsc's array check.
    const embedding = Array.isArray(output.embedding)
      ? output.embedding
      : Array.from(output.embedding as ArrayLike<number>);
    return { embedding };
  }
  return { label: output.label as string, scores: output.scores as Record<string, number> };
}

function normalize(result: InferenceResult): InferenceResult {
  const n: InferenceResult = {
    id: result.id,
    status: result.status,
    output: normalizeOutput(result.output),
    model: { name: result.model.name, version: result.model.version },
    source: { topic: result.source.topic, partition: result.source.partition, offset: result.source.offset },
    timing: {
      requestTimestamp: result.timing.requestTimestamp,
      queueMs: result.timing.queueMs,
      inferenceMs: result.timing.inferenceMs,
      batchSize: result.timing.batchSize,
      completedAt: result.timing.completedAt,
    },
    attributes: result.attributes ?? null,
    truncated: result.truncated ?? false,
    error: result.error ?? null,
  };
  // Optional fields appear only when set (in this order, last), so results without them keep their
  // old shape. Set rather than spread in: a spread of `{}` per result is a runtime call.
  if (result.fallbackReason) n.fallbackReason = result.fallbackReason;
  if (result.runId) n.runId = result.runId;
  return n;
}

function toAvro(result: InferenceResult): AvroResult {
  const n = normalize(result);
  const out = n.output;
  if (out !== null && "tensors" in out && out.tensors !== undefined) {
    // The config schema refuses model.task tensor with an Avro result codec; this is the backstop.
    throw new Error(
      "ResultEncoder: tensor outputs have no Avro encoding; use topics.resultCodec json or v2-json",
    );
  }
  return {
    ...n,
    output:
      out === null
        ? null
        : out.embedding !== undefined
          ? { embedding: out.embedding, label: null, scores: null }
          : { embedding: null, label: out.label as string, scores: out.scores as Record<string, number> },
    // The Avro status enum keeps its original symbols: readers of the first schema have no enum
    // default, so a new symbol would make every new record unreadable for them (docs/contracts.md).
    // A fallback result is `ok` plus `fallbackReason` on the Avro wire.
    status: n.status === "fallback" ? "ok" : n.status,
    truncated: n.truncated ?? false,
    error: n.error ?? null,
    fallbackReason: n.fallbackReason ?? null,
    runId: n.runId ?? null,
  };
}

function fromAvro(r: AvroResult): InferenceResult {
  const out = r.output;
  let output: InferenceOutput | null = null;
  if (out !== null) {
    output =
      out.embedding !== null
        ? { embedding: out.embedding }
        : { label: out.label ?? "", scores: out.scores ?? {} };
  }
  // `ok` + fallbackReason on the Avro wire is a fallback result (see toAvro).
  const fallback =
    r.fallbackReason !== null
      ? { status: "fallback" as const, fallbackReason: r.fallbackReason as FallbackReason }
      : { fallbackReason: null };
  return normalize({ ...r, output, ...fallback });
}
