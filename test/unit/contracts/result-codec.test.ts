import { describe, expect, it } from "vitest";
import type { Codec } from "../../../src/contracts/codec.js";
import type { InferenceResult } from "../../../src/contracts/inference.js";
import { decodeResult, ResultEncoder } from "../../../src/contracts/result-codec.js";
import { seededRandom } from "../../support/seeded-random.js";

const base: Omit<InferenceResult, "id" | "status" | "output"> = {
  model: { name: "bge-small-en-v1.5-q", version: "0123456789ab" },
  source: { topic: "requests", partition: 3, offset: "9007199254740993" },
  timing: {
    requestTimestamp: 1_750_000_000_000,
    queueMs: 1.25,
    inferenceMs: 12.5,
    batchSize: 8,
    completedAt: 1_750_000_000_020,
  },
  attributes: { tenant: "acme" },
  truncated: false,
  error: null,
};

const embedding = Array.from({ length: 384 }, (_, i) => Math.sin(i) / 7);

const results: InferenceResult[] = [
  { ...base, id: "ok-embed", status: "ok", output: { embedding }, truncated: true },
  {
    ...base,
    id: "ok-class",
    status: "ok",
    output: { label: "positive", scores: { positive: 0.9, negative: 0.1 } },
  },
  {
    ...base,
    id: "exp",
    status: "expired",
    output: null,
    attributes: null,
    error: { code: "DEADLINE_EXCEEDED", message: "deadline passed 3 ms before inference" },
  },
  {
    ...base,
    id: "rej",
    status: "rejected",
    output: null,
    error: { code: "EMPTY_TEXT", message: "text is empty" },
  },
];

describe("result codec round trip", () => {
  it.each(results)("json: $id", (r) => {
    const { value, headers } = new ResultEncoder({ codec: "json" }).encode(r);
    expect(headers).toEqual({ "content-type": "application/json" });
    expect(decodeResult(value, headers)).toEqual(r);
  });

  it.each(results)("avro: $id (embeddings as float32)", (r) => {
    const { value, headers } = new ResultEncoder({ codec: "avro" }).encode(r);
    expect(headers).toEqual({ "content-type": "application/avro" });
    const back = decodeResult(value, headers);
    const expected =
      r.output?.embedding !== undefined
        ? { ...r, output: { embedding: r.output.embedding.map(Math.fround) } }
        : r;
    expect(back).toEqual(expected);
  });

  it("avro is smaller than json for embeddings", () => {
    const r = results[0]!;
    const a = new ResultEncoder({ codec: "avro" }).encode(r).value.length;
    const j = new ResultEncoder({ codec: "json" }).encode(r).value.length;
    expect(a).toBeLessThan(j);
  });

  it("defaults truncated to false and error to null; accepts Float32Array embeddings", () => {
    const r = {
      ...base,
      id: "x",
      status: "ok" as const,
      output: { embedding: new Float32Array([0.5, -0.25]) as unknown as number[] },
    };
    delete (r as Partial<InferenceResult>).truncated;
    delete (r as Partial<InferenceResult>).error;
    for (const codec of ["json", "avro"] as Codec[]) {
      const { value, headers } = new ResultEncoder({ codec }).encode(r);
      const back = decodeResult(value, headers);
      expect(back.output).toEqual({ embedding: [0.5, -0.25] });
      expect(back.truncated).toBe(false);
      expect(back.error).toBeNull();
    }
  });

  it("decodeResult fails clearly on garbage", () => {
    expect(() => decodeResult(Buffer.from("[]"))).toThrow(/JSON object/);
    expect(() => decodeResult(Buffer.from('{"id":1}'))).toThrow(/"id"/);
    expect(() => decodeResult(Buffer.from("x"), { "content-type": "text/csv" })).toThrow(/unsupported/);
  });

  it("json: an embedding's numbers are exactly what JSON.stringify writes (generated float32s, NaN, ±Infinity, −0)", () => {
    const random = seededRandom(30);
    const json = new ResultEncoder({ codec: "json" });
    const special = [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, -0, 1e21, 1e-7, 5e-324];
    for (let n = 0; n < 200; n++) {
      const values = Array.from({ length: 1 + Math.floor(random() * 400) }, () => {
        const r = random();
        if (r < 0.02) return special[Math.floor(random() * special.length)] as number;
        if (r < 0.1) return Math.round((random() - 0.5) * 1e6);
        return Math.fround((random() - 0.5) * 10 ** Math.floor(random() * 12 - 8));
      });
      const output = { embedding: n % 2 === 0 ? values : (Float32Array.from(values) as unknown as number[]) };
      // An id holding the spot the numbers go to must stay a string: the marker is found after it.
      const id = n % 3 === 0 ? '"output":{"embedding":[]}' : `id-${n}`;
      const text = json.encode({ ...base, id, status: "ok", output }).value.toString("utf8");
      expect(text).toBe(JSON.stringify(JSON.parse(text)));
      const parsed = JSON.parse(text) as { id: string; output: { embedding: (number | null)[] } };
      expect(parsed.id).toBe(id);
      const expected = Array.from(output.embedding, (v) => (Number.isFinite(v) ? v : null));
      expect(JSON.stringify(parsed.output.embedding)).toBe(JSON.stringify(expected));
    }
  });

  it("validates its options", () => {
    expect(() => new ResultEncoder({ codec: "protobuf" as Codec })).toThrow(/codec/);
  });
});
