import avro, { type Schema } from "avsc";
import { describe, expect, it } from "vitest";
import { avroType, loadSchema } from "../../../src/contracts/avro-schemas.js";
import { codecFromHeaders } from "../../../src/contracts/codec.js";
import type { InferenceResult } from "../../../src/contracts/inference.js";
import {
  frameRegistryPayload,
  parseRegistryFrame,
  registrySchemaIdOf,
} from "../../../src/contracts/registry-wire.js";
import { encodeRequest, RequestDecoder } from "../../../src/contracts/request-codec.js";
import {
  RequestWriterSchemas,
  type WriterSchemaLookup,
} from "../../../src/contracts/request-writer-schemas.js";
import { ResultEncoder } from "../../../src/contracts/result-codec.js";
import { PING, TICKET_V1 } from "../../support/registry-fixtures.js";

// Unit level: the registry is a map here; test/e2e/schema-registry.test.ts uses a real one.
const TICKET = TICKET_V1 as unknown as Schema;
const NO_TEXT = PING as unknown as Schema;

function registryOf(schemas: Record<number, Schema>, calls: number[] = []) {
  let down = false;
  const fetch = async (id: number): Promise<WriterSchemaLookup> => {
    calls.push(id);
    if (down) throw new Error("connect ECONNREFUSED");
    const found = schemas[id];
    return found ? { found } : { notFound: "404" };
  };
  const setDown = (d: boolean) => {
    down = d;
  };
  return { fetch, setDown };
}

function framed(id: number, schema: Schema, value: object): Buffer {
  return frameRegistryPayload(id, avro.Type.forSchema(schema).toBuffer(value));
}

async function decoderWith(schemas: Record<number, Schema>, calls: number[] = []) {
  const registry = registryOf(schemas, calls);
  const decoder = new RequestDecoder({
    defaultCodec: "avro-registry",
    maxMessageBytes: 4096,
    writerSchemas: new RequestWriterSchemas(registry.fetch),
  });
  return { decoder, registry };
}

async function decode(decoder: RequestDecoder, value: Buffer) {
  const ids = decoder.schemaIdsToLoad([{ value }]);
  if (ids.length > 0) await decoder.loadSchemas(ids);
  return decoder.decode(value);
}

describe("registry wire format", () => {
  it("frames and parses magic byte, big-endian schema id and payload", () => {
    const value = frameRegistryPayload(258, Buffer.from([7, 8]));
    expect([...value]).toEqual([0, 0, 0, 1, 2, 7, 8]);
    expect(parseRegistryFrame(value)).toEqual({ ok: true, schemaId: 258, payload: Buffer.from([7, 8]) });
    expect(parseRegistryFrame(Buffer.from([1, 0, 0, 0, 1]))).toEqual({
      ok: false,
      reason: "wrong-magic-byte",
      magicByte: 1,
    });
    expect(parseRegistryFrame(Buffer.from([0, 0]))).toMatchObject({ ok: false, reason: "too-short" });
    expect(registrySchemaIdOf(Buffer.from("{}"))).toBeUndefined();
  });

  it("selects the registry codec by its content-type label", () => {
    expect(codecFromHeaders({ "content-type": "application/vnd.confluent.avro" }, "json")).toEqual({
      codec: "avro-registry",
    });
  });
});

describe("RequestDecoder with avro-registry", () => {
  it("decodes any writer schema that resolves to the request contract, ignoring extra fields", async () => {
    const { decoder } = await decoderWith({ 7: TICKET });
    const outcome = await decode(decoder, framed(7, TICKET, { id: "t-1", priority: 3, text: "help" }));
    expect(outcome).toEqual({
      ok: true,
      request: { id: "t-1", text: "help", deadlineMs: null, attributes: null },
    });
  });

  it("decodes the project's own request schema, registered or framed by encodeRequest", async () => {
    const { decoder } = await decoderWith({ 1: loadSchema("inference-request") });
    const req = { id: "r", text: "t", deadlineMs: 1_767_225_600_000, attributes: { a: "b" } };
    const { value, headers } = encodeRequest(req, "avro-registry", 1);
    expect(headers["content-type"]).toBe("application/vnd.confluent.avro");
    expect(await decode(decoder, value)).toEqual({ ok: true, request: req });
  });

  it("looks each schema id up once and caches it", async () => {
    const calls: number[] = [];
    const { decoder } = await decoderWith({ 7: TICKET }, calls);
    for (let i = 0; i < 3; i++)
      await decode(decoder, framed(7, TICKET, { id: `t${i}`, priority: 1, text: "x" }));
    expect(calls).toEqual([7]);
    expect(
      decoder.schemaIdsToLoad([{ value: framed(7, TICKET, { id: "a", priority: 1, text: "x" }) }]),
    ).toEqual([]);
  });

  it("gives dead-letter codes for an unknown id, a wrong magic byte and an unresolvable writer schema", async () => {
    const { decoder } = await decoderWith({ 3: NO_TEXT, 7: TICKET });
    const unknown = await decode(decoder, framed(99, TICKET, { id: "a", priority: 1, text: "secret" }));
    expect(unknown).toMatchObject({ ok: false, code: "UNKNOWN_SCHEMA_ID" });
    const wrongMagic = await decode(decoder, Buffer.from([1, 0, 0, 0, 3, 2, 97]));
    expect(wrongMagic).toMatchObject({ ok: false, code: "WRONG_MAGIC_BYTE" });
    const unresolvable = await decode(decoder, framed(3, NO_TEXT, { id: "a" }));
    expect(unresolvable).toMatchObject({ ok: false, code: "SCHEMA_UNRESOLVABLE" });
    expect(JSON.stringify([unknown, wrongMagic, unresolvable])).not.toContain("secret");
    const truncated = await decode(decoder, frameRegistryPayload(7, Buffer.from([])));
    expect(truncated).toMatchObject({ ok: false, code: "DECODE_FAILED" });
  });

  it("refuses a registered schema that is not Avro as SCHEMA_UNRESOLVABLE", async () => {
    const writerSchemas = new RequestWriterSchemas(async () => ({ notAvro: "JSON Schema" }));
    const decoder = new RequestDecoder({
      defaultCodec: "avro-registry",
      maxMessageBytes: 100,
      writerSchemas,
    });
    expect(await decode(decoder, frameRegistryPayload(5, Buffer.from("{}")))).toMatchObject({
      ok: false,
      code: "SCHEMA_UNRESOLVABLE",
    });
  });

  it("does not remember a lookup the registry could not answer: it is retried", async () => {
    const calls: number[] = [];
    const { decoder, registry } = await decoderWith({ 7: TICKET }, calls);
    const value = framed(7, TICKET, { id: "a", priority: 1, text: "x" });
    registry.setDown(true);
    await expect(decoder.loadSchemas(decoder.schemaIdsToLoad([{ value }]))).rejects.toThrow(/ECONNREFUSED/);
    expect(decoder.schemaIdsToLoad([{ value }])).toEqual([7]);
    registry.setDown(false);
    expect(await decode(decoder, value)).toMatchObject({ ok: true });
    expect(calls).toEqual([7, 7]);
  });

  it("still honours a record's own content-type (JSON on a registry topic)", async () => {
    const { decoder } = await decoderWith({});
    const value = Buffer.from(JSON.stringify({ id: "j", text: "t" }));
    const headers = { "content-type": "application/json" };
    expect(decoder.schemaIdsToLoad([{ value, headers }])).toEqual([]);
    expect(decoder.decode(value, headers)).toMatchObject({ ok: true, request: { id: "j" } });
  });

  it("refuses to be built for avro-registry without writer schemas", () => {
    expect(() => new RequestDecoder({ defaultCodec: "avro-registry", maxMessageBytes: 10 })).toThrow(
      /writerSchemas/,
    );
  });
});

describe("ResultEncoder with avro-registry", () => {
  it("frames the Avro result with the registered schema id", () => {
    const encoder = new ResultEncoder({ codec: "avro-registry", registrySchemaId: 42 });
    const result: InferenceResult = {
      id: "r",
      status: "ok",
      output: { embedding: [0.5, -0.25] },
      model: { name: "m", version: "v" },
      source: { topic: "t", partition: 0, offset: "1" },
      timing: { requestTimestamp: 1, queueMs: 0, inferenceMs: 0, batchSize: 1, completedAt: 2 },
      attributes: null,
      truncated: false,
      error: null,
    };
    const { value, headers } = encoder.encode(result);
    expect(headers["content-type"]).toBe("application/vnd.confluent.avro");
    const frame = parseRegistryFrame(value);
    expect(frame.ok && frame.schemaId).toBe(42);
    if (!frame.ok) return;
    expect(avroType("inference-result").fromBuffer(frame.payload)).toMatchObject({ id: "r", status: "ok" });
    expect(() => new ResultEncoder({ codec: "avro-registry" })).toThrow(/registry id/);
  });
});
