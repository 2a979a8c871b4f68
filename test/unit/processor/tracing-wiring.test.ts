import { SpanStatusCode } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import { encodeRequest, RequestDecoder } from "../../../src/contracts/request-codec.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import type { ModelPort } from "../../../src/model/model-port.js";
import { MicroBatchRunner } from "../../../src/processor/micro-batch-runner.js";
import { PartitionTask } from "../../../src/processor/partition-task.js";
import { RequestIntake, type WorkItem } from "../../../src/processor/request-intake.js";
import { abortAll, GIVEN_UP } from "../../../src/processor/work-item-spans.js";
import type { PipelineTracer } from "../../../src/tracing/pipeline-tracer.js";
import { idleCommitter } from "../../support/idle-committer.js";
import { inMemoryTracing } from "../tracing/in-memory-tracing.js";

/**
 * The processor's calls into the PipelineTracer (docs/observability.md, "Tracing"), with spans
 * exported into memory: intake starts the request span, the micro-batch runner its batch and model
 * call, the completion carries the span and the result and dead letter its traceparent.
 */
const TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT = "00f067aa0ba902b7";
const CANARY = "canary-wiring-5d1e";
/** Epoch ms of the records and the clock. */
const T0 = 1_700_000_000_000;

function runningTask(): PartitionTask {
  const t = new PartitionTask({ topic: "req", partition: 0 }, "cl", "online");
  t.installCommitter(idleCommitter);
  t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0");
  return t;
}

const completions = new CompletionBuilder({
  resultsTopic: "res",
  deadLetterTopic: "dlq",
  encodeResult: () => ({ value: Buffer.from("{}"), headers: { "content-type": "application/json" } }),
  maxDeadLetterBytes: 100_000,
});

function intakeWith(tracer: PipelineTracer, now: () => number) {
  return new RequestIntake({
    decoder: new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1_000_000 }),
    completions,
    model: { countTokens: () => 3 },
    clock: { now },
    defaultTimeoutMs: 30_000,
    tracer,
  });
}

function record(offset: number, request: object, headers: Record<string, string> = {}) {
  const encoded = encodeRequest(request as { id: string; text: string }, "json");
  return {
    offset: String(offset),
    key: Buffer.from(CANARY),
    value: encoded.value,
    headers: { ...encoded.headers, ...headers },
    timestamp: String(T0),
  };
}

/** A runner whose completions go to `complete`, its clock at `now()`. */
function runnerWith(
  tracer: PipelineTracer,
  now: () => number,
  complete: (completion: RecordCompletion) => void = () => {},
): MicroBatchRunner {
  return new MicroBatchRunner({
    model,
    completions,
    clock: { now },
    fallback: undefined,
    emit: () => {},
    msPerItem: () => 0,
    recordInference: () => {},
    complete: (_task, _generation, _offset, completion) => complete(completion),
    tracer,
  });
}

const model: ModelPort = {
  identity: { name: "tiny", version: "v1" },
  task: "embedding",
  countTokens: () => 3,
  run: async (texts) => ({
    outcomes: texts.map(() => ({ ok: true, output: { embedding: [0] }, tokens: 3, truncated: false })),
    stats: { inferenceMs: 1, realTokens: 3 * texts.length, paddedTokens: 3 * texts.length },
  }),
  close: async () => {},
} as ModelPort;

describe("the processor's spans", () => {
  it("intake → batch → model → completion: spans, links and the result's traceparent", async () => {
    const t = await inMemoryTracing({}, { consumerGroup: "g" });
    let now = T0;
    const intake = intakeWith(t.tracing.tracer, () => now);
    const task = runningTask();
    const traced = intake.take(
      task,
      record(
        0,
        { id: "a", text: CANARY, attributes: { note: CANARY } },
        {
          traceparent: `00-${TRACE}-${PARENT}-01`,
        },
      ),
    );
    const plain = intake.take(task, record(1, { id: "b", text: CANARY }));
    const late = intake.take(task, record(2, { id: "c", text: CANARY, deadlineMs: T0 + 2 }));
    const bad = intake.take(task, { ...record(3, { id: "d", text: "x" }), value: Buffer.from(`{${CANARY}`) });
    const dup = intake.take(task, record(4, { id: "a", text: CANARY }));
    expect([traced.kind, plain.kind, late.kind, bad.kind, dup.kind]).toEqual([
      "queued",
      "queued",
      "queued",
      "done",
      "done",
    ]);
    const items = [traced, plain, late].map((r) => (r as { item: WorkItem }).item);

    const done: RecordCompletion[] = [];
    const runner = runnerWith(
      t.tracing.tracer,
      () => now,
      (completion) => done.push(completion),
    );
    now += 5;
    await runner.run({
      lane: "online",
      items,
      reason: "size",
      formedAtMs: now,
      enqueuedAtMs: items.map(() => now),
      tokens: 9,
    });
    expect(done.map((c) => c.status)).toEqual(["expired", "ok", "ok"]);
    expect(done.every((c) => c.span !== undefined)).toBe(true);
    const intakeDone = [bad, dup].map((r) => (r as { completion: RecordCompletion }).completion);
    expect(intakeDone.every((c) => c.span !== undefined)).toBe(true);
    for (const c of [...done, ...intakeDone]) c.span?.commit();

    const spans = await t.finished();
    const byOffset = (offset: number) =>
      spans.find((s) => s.name === "request req" && s.attributes["messaging.kafka.offset"] === offset)!;
    // The result of the traced request points at its request span, in the producer's trace.
    const result = done.find((c) => c.span === items[0]?.span)!;
    const header = String(result.outputs[0]?.headers?.traceparent);
    expect(header).toBe(`00-${TRACE}-${byOffset(0).spanContext().spanId}-01`);
    expect(result.outputs[0]?.headers?.["content-type"]).toBe("application/json");
    // The dead letter too, in place of the record's own (it had none here: a new trace).
    const deadLetter = intakeDone[0]!;
    expect(String(deadLetter.outputs[0]?.headers?.traceparent)).toContain(byOffset(3).spanContext().spanId);
    expect(byOffset(3).status).toEqual({ code: SpanStatusCode.ERROR, message: "dead letter DECODE_FAILED" });
    expect(byOffset(4).attributes["sluice.outcome"]).toBe("duplicate");
    // The expired request completed before the model call: no inference time, no model call of its own.
    expect(byOffset(2).attributes["sluice.result.status"]).toBe("expired");
    expect(byOffset(2).attributes["sluice.inference_ms"]).toBeUndefined();
    expect(byOffset(1).attributes["sluice.inference_ms"]).toBeGreaterThanOrEqual(0);
    const infers = spans.filter((s) => s.name === "infer tiny");
    const batchInfer = infers.find((s) => s.links.length === 0)!;
    expect(batchInfer.attributes).toMatchObject({ "sluice.model.items": 2, "sluice.model.tokens": 6 });
    expect(infers).toHaveLength(3); // the batch's, and one in each of the two requests' traces
    const batch = spans.find((s) => s.name === "process req" && s.parentSpanContext === undefined)!;
    expect(batch.links).toHaveLength(3);
    expect(JSON.stringify(spans.map((s) => [s.name, s.attributes, s.status]))).not.toContain(CANARY);
    await t.tracing.shutdown();
  });

  it("void and dropped work items end their spans with the reason", async () => {
    const t = await inMemoryTracing();
    const intake = intakeWith(t.tracing.tracer, () => T0);
    const task = runningTask();
    const item = (intake.take(task, record(0, { id: "a", text: "x" })) as { item: WorkItem }).item;
    task.reset(); // a failed transaction voids the partition's work
    const runner = runnerWith(t.tracing.tracer, () => T0);
    await runner.run({
      lane: "online",
      items: [item],
      reason: "size",
      formedAtMs: 0,
      enqueuedAtMs: [0],
      tokens: 3,
    });
    const other = runningTask();
    const left = (intake.take(other, record(0, { id: "b", text: "y" })) as { item: WorkItem }).item;
    abortAll([left]); // left to the next owner at shutdown
    const spans = await t.finished();
    expect(spans.map((s) => s.status.message).sort()).toEqual(
      [`aborted ${GIVEN_UP.reset}`, `aborted ${GIVEN_UP.shutdown}`].sort(),
    );
    await t.tracing.shutdown();
  });
});
