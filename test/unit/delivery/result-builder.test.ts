import { describe, expect, it } from "vitest";
import { decodeResult, ResultEncoder } from "../../../src/contracts/result-codec.js";
import {
  buildResult,
  expiredOutcome,
  type ResultContext,
  type ResultOutcome,
  routeOutcome,
  statusOf,
} from "../../../src/delivery/result-builder.js";

const ctx: ResultContext = {
  request: { id: "r1", text: "hello", deadlineMs: 2000, attributes: { tenant: "acme" } },
  source: { topic: "requests", partition: 1, offset: "7" },
  requestTimestamp: 900,
  model: { name: "m", version: "abcdefabcdef" },
  queueMs: 3,
  inferenceMs: 11,
  batchSize: 4,
  completedAt: 1020,
};

describe("result builder", () => {
  const table: [string, ResultOutcome, string, "result" | "dead_letter"][] = [
    ["ok", { ok: true, output: { embedding: [0.1, 0.2] }, tokens: 3, truncated: true }, "ok", "result"],
    ["expired", { ok: false, code: "DEADLINE_EXCEEDED", message: "late" }, "expired", "result"],
    ["empty text", { ok: false, code: "EMPTY_TEXT", message: "text is empty" }, "rejected", "result"],
    ["invalid text", { ok: false, code: "INVALID_TEXT", message: "not a string" }, "rejected", "result"],
    ["tokenize failed", { ok: false, code: "TOKENIZE_FAILED", message: "boom" }, "error", "dead_letter"],
    ["inference failed", { ok: false, code: "INFERENCE_FAILED", message: "ORT" }, "error", "dead_letter"],
  ];

  it.each(table)("%s → status %s, routed to %s", (_n, outcome, status, kind) => {
    expect(statusOf(outcome)).toBe(status);
    const route = routeOutcome(ctx, outcome);
    expect(route.kind).toBe(kind);
    if (route.kind === "dead_letter") {
      expect(route.error).toEqual({
        code: (outcome as { code: string }).code,
        message: (outcome as { message: string }).message,
        stage: "model",
        // The version that failed it (docs/model-upgrades.md, "Versions").
        context: { "model-version": ctx.model.version },
      });
    }
  });

  it("fills every field from the request, source, model and timing", () => {
    const r = buildResult(ctx, { ok: true, output: { embedding: [0.5] }, tokens: 2, truncated: true });
    expect(r).toEqual({
      id: "r1",
      status: "ok",
      output: { embedding: [0.5] },
      model: { name: "m", version: "abcdefabcdef" },
      source: { topic: "requests", partition: 1, offset: "7" },
      timing: { requestTimestamp: 900, queueMs: 3, inferenceMs: 11, batchSize: 4, completedAt: 1020 },
      attributes: { tenant: "acme" },
      truncated: true,
      error: null,
    });
  });

  it("an expired result carries DEADLINE_EXCEEDED and no output, and encodes in both codecs", () => {
    const r = buildResult(ctx, expiredOutcome(2000, 2012));
    expect(r.status).toBe("expired");
    expect(r.output).toBeNull();
    expect(r.error).toEqual({ code: "DEADLINE_EXCEEDED", message: expect.stringMatching(/12 ms/) });
    for (const codec of ["json", "avro"] as const) {
      const enc = new ResultEncoder({ codec }).encode(r);
      expect(decodeResult(enc.value, enc.headers)).toEqual(r);
    }
  });

  it("passes null attributes through as null", () => {
    const r = buildResult(
      { ...ctx, request: { id: "x", text: "t" } },
      { ok: false, code: "EMPTY_TEXT", message: "m" },
    );
    expect(r.attributes).toBeNull();
    expect(r.truncated).toBe(false);
  });
});
