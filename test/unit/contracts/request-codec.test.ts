import { describe, expect, it } from "vitest";
import { avroType } from "../../../src/contracts/avro-schemas.js";
import type { Codec } from "../../../src/contracts/codec.js";
import type { InferenceRequest } from "../../../src/contracts/inference.js";
import { encodeRequest, RequestDecoder } from "../../../src/contracts/request-codec.js";

const json = new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1024 });
const avro = new RequestDecoder({ defaultCodec: "avro", maxMessageBytes: 1024 });
const SECRET = "patient Alice has condition X";

function jsonValue(obj: unknown): Buffer {
  return Buffer.from(JSON.stringify(obj));
}

describe("request codec round trip", () => {
  const requests: InferenceRequest[] = [
    { id: "r1", text: "hello world", deadlineMs: null, attributes: null },
    { id: "r2", text: "", deadlineMs: 1_750_000_000_123, attributes: { tenant: "acme", lang: "en" } },
    { id: "ünïcødé-✓", text: "emoji 🚀 and accents é", deadlineMs: null, attributes: {} },
  ];
  for (const codec of ["json", "avro"] as Codec[]) {
    it.each(requests)(`${codec}: %o`, (req) => {
      const { value, headers } = encodeRequest(req, codec);
      expect(headers["content-type"]).toBe(codec === "json" ? "application/json" : "application/avro");
      // Header wins over the decoder's default codec, both ways.
      for (const decoder of [json, avro]) {
        const out = decoder.decode(value, headers);
        expect(out).toEqual({ ok: true, request: req });
      }
    });
  }

  it("without a header the topic's default codec applies", () => {
    const { value } = encodeRequest({ id: "a", text: "t" }, "avro");
    expect(avro.decode(value)).toMatchObject({ ok: true, request: { id: "a", text: "t" } });
    expect(json.decode(value).ok).toBe(false);
  });

  it("accepts avro/binary, charset parameters, array and Buffer header values, any header case", () => {
    const a = encodeRequest({ id: "a", text: "t" }, "avro").value;
    expect(json.decode(a, { "content-type": "avro/binary" }).ok).toBe(true);
    expect(json.decode(a, { "Content-Type": Buffer.from("application/avro") }).ok).toBe(true);
    expect(json.decode(a, { "content-type": [Buffer.from("avro/binary")] }).ok).toBe(true);
    const j = jsonValue({ id: "a", text: "t" });
    expect(avro.decode(j, { "content-type": "application/json; charset=utf-8" }).ok).toBe(true);
  });

  it("normalises absent optional fields to null and ignores unknown fields", () => {
    const out = json.decode(jsonValue({ id: "a", text: "t", future: 1 }));
    expect(out).toEqual({ ok: true, request: { id: "a", text: "t", deadlineMs: null, attributes: null } });
  });
});

describe("RequestDecoder rejects bad input with a code and a payload-free message", () => {
  const cases: [string, Buffer | null, Record<string, string> | undefined, string, RegExp][] = [
    ["tombstone", null, undefined, "DECODE_FAILED", /no value/],
    [
      "not JSON",
      Buffer.from(`{"id": "x", "text": "${SECRET}"`),
      undefined,
      "DECODE_FAILED",
      /not valid JSON/,
    ],
    ["JSON array", jsonValue([SECRET]), undefined, "SCHEMA_VIOLATION", /expected an object/],
    ["JSON string", jsonValue(SECRET), undefined, "SCHEMA_VIOLATION", /expected an object/],
    ["missing id", jsonValue({ text: SECRET }), undefined, "MISSING_ID", /has no "id"/],
    ["empty id", jsonValue({ id: "", text: SECRET }), undefined, "MISSING_ID", /"id" is an empty string/],
    ["null id", jsonValue({ id: null, text: SECRET }), undefined, "MISSING_ID", /"id"/],
    ["numeric id", jsonValue({ id: 7, text: SECRET }), undefined, "SCHEMA_VIOLATION", /"id" is a number/],
    [
      "missing text",
      jsonValue({ id: "a" }),
      undefined,
      "SCHEMA_VIOLATION",
      /"text" is missing; expected a string/,
    ],
    [
      "text object",
      jsonValue({ id: "a", text: { t: SECRET } }),
      undefined,
      "SCHEMA_VIOLATION",
      /"text" is an object/,
    ],
    [
      "deadline string",
      jsonValue({ id: "a", text: SECRET, deadlineMs: "soon" }),
      undefined,
      "SCHEMA_VIOLATION",
      /deadlineMs/,
    ],
    [
      "deadline in epoch seconds",
      jsonValue({ id: "a", text: SECRET, deadlineMs: 1_764_590_000 }),
      undefined,
      "SCHEMA_VIOLATION",
      /"deadlineMs" is 1764590000, which is not epoch milliseconds .*multiply by 1000/,
    ],
    [
      "attributes array",
      jsonValue({ id: "a", text: SECRET, attributes: [SECRET] }),
      undefined,
      "SCHEMA_VIOLATION",
      /attributes/,
    ],
    [
      "attribute number",
      jsonValue({ id: "a", text: SECRET, attributes: { n: 1 } }),
      undefined,
      "SCHEMA_VIOLATION",
      /attributes\.n/,
    ],
    [
      "unknown content type",
      jsonValue({ id: "a", text: SECRET }),
      { "content-type": "text/plain" },
      "DECODE_FAILED",
      /unsupported content-type "text\/plain"/,
    ],
    [
      "garbage as avro",
      Buffer.from(SECRET),
      { "content-type": "application/avro" },
      "DECODE_FAILED",
      /not a valid Avro/,
    ],
    [
      "json as avro",
      jsonValue({ id: "a", text: SECRET }),
      { "content-type": "avro/binary" },
      "DECODE_FAILED",
      /not a valid Avro/,
    ],
    ["too large", Buffer.alloc(1025, 32), undefined, "PAYLOAD_TOO_LARGE", /1025 bytes.*maxMessageBytes=1024/],
  ];
  it.each(cases)("%s", (_name, value, headers, code, pattern) => {
    const out = json.decode(value, headers);
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.code).toBe(code);
    expect(out.message).toMatch(pattern);
    expect(out.message).not.toContain("Alice");
  });

  it("does not use the Kafka key in place of a missing id", () => {
    const out = json.decode(jsonValue({ text: "t" }), undefined, Buffer.from("key-1"));
    expect(out).toMatchObject({ ok: false, code: "MISSING_ID" });
  });

  it("rejects an Avro request with an empty id as MISSING_ID", () => {
    const value = avroType("inference-request").toBuffer({
      id: "",
      text: "t",
      deadlineMs: null,
      attributes: null,
    });
    expect(avro.decode(value)).toMatchObject({ ok: false, code: "MISSING_ID" });
  });

  it("rejects trailing bytes after an Avro record", () => {
    const { value } = encodeRequest({ id: "a", text: "t" }, "avro");
    expect(avro.decode(Buffer.concat([value, Buffer.from([1, 2, 3])]))).toMatchObject({
      ok: false,
      code: "DECODE_FAILED",
    });
  });

  it("validates its options", () => {
    expect(() => new RequestDecoder({ defaultCodec: "xml" as Codec, maxMessageBytes: 1 })).toThrow(
      /defaultCodec/,
    );
    expect(() => new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 0 })).toThrow(/maxMessageBytes/);
  });
});
