import { describe, expect, it } from "vitest";
import type { InferenceResult } from "../../../src/contracts/inference.js";
import { encodeRequest, RequestDecoder } from "../../../src/contracts/request-codec.js";
import { ResultEncoder } from "../../../src/contracts/result-codec.js";
import { decodeV2Request, decodeV2Response } from "../../../src/contracts/v2-json-codec.js";
import { IRIS_REQUEST } from "../../support/tiny-tensor-onnx.js";

const json = (v: unknown) => Buffer.from(JSON.stringify(v), "utf8");
const decoder = new RequestDecoder({ defaultCodec: "v2-json", maxMessageBytes: 1_000_000 });

function failure(value: unknown, headers?: Record<string, string>) {
  const d = decodeV2Request(json(value), headers);
  if (d.ok) throw new Error("expected a failure");
  return d;
}

describe("V2 JSON request codec", () => {
  it("decodes MLServer's iris request with nested data; the id comes from x-request-id", () => {
    const d = decoder.decode(json(IRIS_REQUEST), { "x-request-id": "req-1" });
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect(d.request.id).toBe("req-1");
    expect(d.request.text).toBe("");
    expect(d.request.tensors).toEqual({
      inputs: [{ name: "predict", datatype: "FP32", shape: [1, 4], data: [1, 2, 3, 4] }],
      outputs: null,
    });
  });

  it("`id` wins over the header; flat data, requested outputs and deadline_ms are read", () => {
    const d = decodeV2Request(
      json({
        id: "a",
        parameters: { deadline_ms: 2_000_000_000_000 },
        inputs: [{ name: "x", shape: [2, 2], datatype: "INT64", data: [1, 2, 3, 4] }],
        outputs: [{ name: "label" }],
      }),
      { "x-request-id": "b" },
    );
    expect(d.ok && d.request).toMatchObject({
      id: "a",
      deadlineMs: 2_000_000_000_000,
      tensors: { outputs: ["label"] },
    });
  });

  it("a single BYTES input is also the request's text (text models accept V2 requests)", () => {
    const { value, headers } = encodeRequest({ id: "t", text: "the cat sat" }, "v2-json");
    const d = decoder.decode(value, headers);
    expect(d.ok && d.request.text).toBe("the cat sat");
  });

  it("application/json on a v2-json topic is V2; on a json topic it is Sluice's JSON", () => {
    const headers = { "content-type": "application/json", "x-request-id": "r" };
    expect(decoder.decode(json(IRIS_REQUEST), headers).ok).toBe(true);
    const plain = new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1_000_000 });
    expect(plain.decode(json(IRIS_REQUEST), headers)).toMatchObject({ ok: false, code: "MISSING_ID" });
  });

  it("a request whose mlserver-model header names another model is MODEL_MISMATCH, not answered", () => {
    const served = new RequestDecoder({
      defaultCodec: "v2-json",
      maxMessageBytes: 1_000_000,
      servedModel: "iris",
    });
    const other = served.decode(json(IRIS_REQUEST), { "x-request-id": "r", "mlserver-model": "churn" });
    expect(other).toMatchObject({ ok: false, code: "MODEL_MISMATCH" });
    expect(!other.ok && other.message).toContain('names model "churn"');
    expect(!other.ok && other.message).toContain('serves "iris" (model.name)');
    expect(served.decode(json(IRIS_REQUEST), { "x-request-id": "r", "mlserver-model": "iris" }).ok).toBe(
      true,
    );
    // Without the header (Seldon routes by topic), any request goes.
    expect(served.decode(json(IRIS_REQUEST), { "x-request-id": "r" }).ok).toBe(true);
  });

  it("names what is wrong, never the payload", () => {
    expect(failure(IRIS_REQUEST).code).toBe("MISSING_ID");
    expect(failure({ id: "x", inputs: [] }).message).toMatch(/non-empty array/);
    const count = failure({
      id: "x",
      inputs: [{ name: "p", shape: [1, 4], datatype: "FP32", data: [1, 2, 3] }],
    });
    expect(count).toMatchObject({ code: "SCHEMA_VIOLATION" });
    expect(count.message).toContain("3 elements but shape [1,4] holds 4");
    const type = failure({ id: "x", inputs: [{ name: "p", shape: [1], datatype: "FP16", data: [1] }] });
    expect(type.message).toMatch(/FP16" is not supported/);
    const el = failure({ id: "x", inputs: [{ name: "p", shape: [2], datatype: "INT32", data: [1, 2.5] }] });
    expect(el.message).toContain("element 1 is a number; INT32 expects 32-bit integers");
    const twice = failure({
      id: "x",
      inputs: [
        { name: "p", shape: [1], datatype: "BOOL", data: [true] },
        { name: "p", shape: [1], datatype: "BOOL", data: [false] },
      ],
    });
    expect(twice.message).toMatch(/given twice/);
    expect(failure({ id: "x", parameters: { deadline_ms: 5 }, inputs: IRIS_REQUEST.inputs }).message).toMatch(
      /epoch seconds/,
    );
    expect(decodeV2Request(Buffer.from("{nope"))).toMatchObject({ ok: false, code: "DECODE_FAILED" });
  });
});

describe("V2 JSON result codec", () => {
  const base: InferenceResult = {
    id: "req-1",
    status: "ok",
    output: { tensors: [{ name: "probability", datatype: "FP32", shape: [1, 1], data: [0.25] }] },
    model: { name: "lr", version: "abc123abc123" },
    source: { topic: "in", partition: 2, offset: "17" },
    timing: { requestTimestamp: 1, queueMs: 2, inferenceMs: 3, batchSize: 4, completedAt: 5 },
    attributes: null,
  };
  const encoder = new ResultEncoder({ codec: "v2-json" });

  it("writes a V2 inference response with Sluice's fields as scalar parameters and x-request-id", () => {
    const { value, headers } = encoder.encode(base);
    expect(headers).toEqual({ "content-type": "application/json", "x-request-id": "req-1" });
    expect(decodeV2Response(value)).toEqual({
      model_name: "lr",
      model_version: "abc123abc123",
      id: "req-1",
      parameters: {
        status: "ok",
        source_topic: "in",
        source_partition: 2,
        source_offset: "17",
        request_timestamp: 1,
        queue_ms: 2,
        inference_ms: 3,
        batch_size: 4,
        completed_at: 5,
        truncated: false,
      },
      outputs: [{ name: "probability", datatype: "FP32", shape: [1, 1], data: [0.25] }],
    });
  });

  it("text outputs become V2 tensors; status, error and fallback go to parameters", () => {
    const emb = decodeV2Response(encoder.encode({ ...base, output: { embedding: [0.5, 0.25] } }).value);
    expect(emb.outputs).toEqual([{ name: "embedding", datatype: "FP32", shape: [1, 2], data: [0.5, 0.25] }]);
    const cls = decodeV2Response(
      encoder.encode({
        ...base,
        status: "fallback",
        fallbackReason: "deadline",
        output: { label: "pos", scores: { neg: 0.25, pos: 0.75 } },
      }).value,
    );
    expect(cls.parameters).toMatchObject({ status: "fallback", fallback_reason: "deadline" });
    expect(cls.outputs[0]).toEqual({ name: "label", datatype: "BYTES", shape: [1], data: ["pos"] });
    expect(cls.outputs[1]).toMatchObject({
      name: "scores",
      data: [0.25, 0.75],
      parameters: { labels: '["neg","pos"]' },
    });
    const expired = decodeV2Response(
      encoder.encode({
        ...base,
        status: "expired",
        output: null,
        error: { code: "DEADLINE_EXCEEDED", message: "late" },
      }).value,
    );
    expect(expired.outputs).toEqual([]);
    expect(expired.parameters).toMatchObject({ status: "expired", error_code: "DEADLINE_EXCEEDED" });
  });
});
