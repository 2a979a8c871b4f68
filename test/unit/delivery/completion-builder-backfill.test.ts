import { describe, expect, it } from "vitest";
import { RUN_ID_HEADER } from "../../../src/contracts/lane.js";
import { decodeResult, ResultEncoder } from "../../../src/contracts/result-codec.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import type { DeadLetterSource } from "../../../src/delivery/dead-letter.js";
import type { ResultContext } from "../../../src/delivery/result-builder.js";

const encoder = new ResultEncoder({ codec: "json" });
const source: DeadLetterSource = {
  topic: "backfill",
  partition: 2,
  offset: "41",
  key: Buffer.from("row-1"),
  value: Buffer.from("{}"),
  headers: { [RUN_ID_HEADER]: "run-7" },
  timestamp: "1000",
};
const ctx: ResultContext = {
  request: { id: "row-1", text: "a row" },
  source: { topic: "backfill", partition: 2, offset: "41" },
  requestTimestamp: 1000,
  model: { name: "m", version: "abcdefabcdef" },
  queueMs: 1,
  inferenceMs: 2,
  batchSize: 1,
  completedAt: 1010,
};
const ok = { ok: true as const, output: { embedding: [0.5] }, tokens: 2, truncated: false };

function builder(backfillResultsTopic?: string) {
  return new CompletionBuilder({
    resultsTopic: "results",
    ...(backfillResultsTopic ? { backfillResultsTopic } : {}),
    deadLetterTopic: "dlq",
    encodeResult: (r) => encoder.encode(r),
    maxDeadLetterBytes: 100_000,
  });
}

describe("CompletionBuilder routes the backfill lane", () => {
  it("a backfill result goes to topics.backfillResults with runId in the value and the header", () => {
    const c = builder("backfill-results").outcome(
      source,
      { ...ctx, lane: "backfill", runId: "run-7" },
      ok,
      undefined,
    );
    expect(c.outputs).toHaveLength(1);
    const out = c.outputs[0]!;
    expect(out.topic).toBe("backfill-results");
    expect(out.headers?.[RUN_ID_HEADER]).toBe("run-7");
    const decoded = decodeResult(out.value as Buffer, out.headers);
    expect(decoded.runId).toBe("run-7");
    expect(decoded.id).toBe("row-1");
  });

  it("a backfill-results encoder (its own registry subject) encodes backfill results only", () => {
    const avro = new ResultEncoder({ codec: "avro" });
    const b = new CompletionBuilder({
      resultsTopic: "results",
      backfillResultsTopic: "backfill-results",
      deadLetterTopic: "dlq",
      encodeResult: (r) => encoder.encode(r),
      encodeBackfillResult: (r) => avro.encode(r),
      maxDeadLetterBytes: 100_000,
    });
    const backfill = b.outcome(source, { ...ctx, lane: "backfill", runId: "run-7" }, ok, undefined)
      .outputs[0]!;
    const online = b.outcome(source, { ...ctx, lane: "online" }, ok, undefined).outputs[0]!;
    expect(backfill.headers?.["content-type"]).toBe(
      avro.encode(decodeResult(online.value as Buffer, online.headers)).headers["content-type"],
    );
    expect(online.headers?.["content-type"]).toBe("application/json");
    expect(decodeResult(backfill.value as Buffer, backfill.headers).runId).toBe("run-7");
  });

  it("without topics.backfillResults, backfill results share the results topic", () => {
    const c = builder().outcome(source, { ...ctx, lane: "backfill", runId: "run-7" }, ok, undefined);
    expect(c.outputs[0]?.topic).toBe("results");
  });

  it("online results stay on the results topic, without runId or the run header", () => {
    const c = builder("backfill-results").outcome(source, { ...ctx, lane: "online" }, ok, undefined);
    const out = c.outputs[0]!;
    expect(out.topic).toBe("results");
    expect(out.headers?.[RUN_ID_HEADER]).toBeUndefined();
    const decoded = decodeResult(out.value as Buffer, out.headers);
    expect(decoded.runId).toBeUndefined();
    expect(JSON.parse((out.value as Buffer).toString("utf8"))).not.toHaveProperty("runId");
  });

  it("a backfill row the model failed on is a dead letter that keeps the run header", () => {
    const c = builder("backfill-results").outcome(
      source,
      { ...ctx, lane: "backfill", runId: "run-7" },
      { ok: false, code: "INFERENCE_FAILED", message: "ORT failed" },
      undefined,
    );
    expect(c.outcome).toBe("dead_letter");
    expect(c.outputs[0]?.topic).toBe("dlq");
    expect(String(c.outputs[0]?.headers?.[RUN_ID_HEADER])).toBe("run-7");
  });
});
