import { SpanKind, SpanStatusCode } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { IHeaders } from "kafkajs";
import { describe, expect, it } from "vitest";
import type { RequestSpan } from "../../../src/tracing/pipeline-tracer.js";
import { ATTR } from "../../../src/tracing/span-attributes.js";
import { inMemoryTracing } from "./in-memory-tracing.js";

const TRACE_A = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_A = "00f067aa0ba902b7";
const TRACE_B = "0af7651916cd43dd8448eb211c80319c";
const SPAN_B = "b7ad6b7169203331";
/** Request text, an attribute value and a key that must never reach a span. */
const PAYLOAD = "canary-payload-7f3a";

const model = { name: "tiny", version: "abc123def456" };

function record(offset: string, headers?: IHeaders) {
  return {
    offset,
    headers,
    key: Buffer.from(PAYLOAD),
    value: Buffer.from(`{"id":"${PAYLOAD}","text":"${PAYLOAD}"}`),
  };
}

function allAttributeValues(spans: ReadableSpan[]): string[] {
  return spans.flatMap((span) => [
    span.name,
    span.status.message ?? "",
    ...Object.entries(span.attributes).map(([k, v]) => `${k}=${String(v)}`),
    ...span.events.map((e) => e.name),
  ]);
}

/** A clock that moves 1 ms per read. */
function ticking() {
  let t = 0;
  return () => ++t;
}

describe("the pipeline's spans (OpenTelemetry, in memory)", () => {
  it("request spans join the request's trace; the batch links every request; model call and transaction hang from the batch, and each request's trace holds its own copies", async () => {
    const t = await inMemoryTracing(
      { requestAttributes: ["tenant"] },
      { consumerGroup: "sluice-g", now: ticking() },
    );
    const tracer = t.tracing.tracer;
    expect(tracer.enabled).toBe(true);

    const withParent = record("41", {
      traceparent: Buffer.from(`00-${TRACE_A}-${SPAN_A}-01`),
      tracestate: Buffer.from("vendor=x"),
      "content-type": Buffer.from("application/json"),
    });
    const repeated = record("42", {
      traceparent: [Buffer.from(`00-${TRACE_B}-${SPAN_B}-01`), `00-${TRACE_A}-${SPAN_A}-01`],
      tracestate: [Buffer.from("a=1"), "b=2"],
    });
    const without = record("43");
    const items: { span: RequestSpan }[] = [withParent, repeated, without].map((r) => ({
      span: tracer.startRequest("in", 2, r, "online"),
    }));
    for (const item of items) item.span.queued({ tenant: "acme", secret: PAYLOAD });

    const batch = tracer.startBatch("online", "size", items);
    const call = batch.modelCall(model, 3, 30);
    call.end();
    items[0]!.span.completed({ outcome: "result", status: "ok" });
    items[1]!.span.completed({ outcome: "result", status: "fallback", fallbackReason: "model_error" });
    items[2]!.span.completed({
      outcome: "dead_letter",
      errorCode: "INFERENCE_FAILED",
      deadLetter: { stage: "model" },
    });
    batch.end();
    const headers = items[0]!.span.traceHeaders()!;
    const tx = tracer.startTransaction("in", 2, items);
    tx.sent();
    tx.commit();

    const spans = await t.finished();
    // The batch's trace (process, infer, commit) and, per request, request + process + infer + commit.
    const perRequest = ["request in", "process in", "infer tiny", "commit in"];
    expect(spans.map((s) => s.name).sort()).toEqual(
      ["commit in", "infer tiny", "process in", ...perRequest, ...perRequest, ...perRequest].sort(),
    );
    const requests = spans.filter((s) => s.name === "request in");
    const [first, second, third] = ["41", "42", "43"].map(
      (offset) => requests.find((s) => s.attributes[ATTR.messagingKafkaOffset] === Number(offset))!,
    );

    // Parented to the incoming context; the first traceparent of a repeated header counts.
    expect(first!.spanContext().traceId).toBe(TRACE_A);
    expect(first!.parentSpanContext?.spanId).toBe(SPAN_A);
    expect(first!.parentSpanContext?.isRemote).toBe(true);
    expect(first!.spanContext().traceState?.serialize()).toBe("vendor=x");
    expect(second!.spanContext().traceId).toBe(TRACE_B);
    expect(second!.parentSpanContext?.spanId).toBe(SPAN_B);
    expect(second!.spanContext().traceState?.serialize()).toBe("a=1,b=2");
    // No context: a new trace, a root span.
    expect(third!.parentSpanContext).toBeUndefined();
    expect([TRACE_A, TRACE_B]).not.toContain(third!.spanContext().traceId);

    expect(first!.kind).toBe(SpanKind.CONSUMER);
    expect(first!.attributes).toMatchObject({
      [ATTR.messagingSystem]: "kafka",
      [ATTR.messagingOperationType]: "process",
      [ATTR.messagingDestinationName]: "in",
      [ATTR.messagingDestinationPartitionId]: "2",
      [ATTR.messagingConsumerGroupName]: "sluice-g",
      [ATTR.messagingKafkaOffset]: 41,
      [ATTR.lane]: "online",
      [ATTR.outcome]: "result",
      [ATTR.resultStatus]: "ok",
      "sluice.request.attribute.tenant": "acme",
    });
    for (const span of requests) {
      for (const timing of [ATTR.intakeMs, ATTR.queueMs, ATTR.commitMs]) {
        expect(
          span.attributes[timing],
          `${span.attributes[ATTR.messagingKafkaOffset]} ${timing}`,
        ).toBeGreaterThan(0);
      }
      expect(span.attributes[ATTR.inferenceMs]).toBeGreaterThan(0);
      expect(span.attributes["sluice.request.attribute.secret"]).toBeUndefined();
    }
    expect(first!.status.code).toBe(SpanStatusCode.UNSET);
    expect(second!.attributes).toMatchObject({
      [ATTR.resultStatus]: "fallback",
      [ATTR.fallbackReason]: "model_error",
    });
    expect(second!.status.code).toBe(SpanStatusCode.UNSET);
    expect(third!.attributes).toMatchObject({
      [ATTR.outcome]: "dead_letter",
      [ATTR.errorCode]: "INFERENCE_FAILED",
      [ATTR.deadLetterStage]: "model",
    });
    expect(third!.status).toEqual({ code: SpanStatusCode.ERROR, message: "dead letter INFERENCE_FAILED" });

    // The result record's headers point at the request span, in the request's trace.
    expect(headers.traceparent).toBeInstanceOf(Buffer);
    expect(headers.traceparent!.toString()).toBe(`00-${TRACE_A}-${first!.spanContext().spanId}-01`);
    expect(headers.tracestate!.toString()).toBe("vendor=x");
    expect(items[0]!.span.traceHeaders()).toBe(headers);

    // The batch: one span, a link to each request span; each request span links back to it.
    const batchTrace = spans.find((s) => s.name === "process in" && s.parentSpanContext === undefined)!;
    const process = t.named(spans, "process in", batchTrace.spanContext().traceId);
    expect(process.parentSpanContext).toBeUndefined();
    expect(process.links.map((l) => l.context.spanId).sort()).toEqual(
      requests.map((s) => s.spanContext().spanId).sort(),
    );
    expect(process.attributes).toMatchObject({
      [ATTR.messagingBatchMessageCount]: 3,
      [ATTR.messagingDestinationName]: "in",
      [ATTR.messagingDestinationPartitionId]: "2",
      [ATTR.lane]: "online",
      [ATTR.flushReason]: "size",
    });
    for (const span of requests)
      expect(span.links.map((l) => l.context.spanId)).toEqual([process.spanContext().spanId]);

    const infer = t.named(spans, "infer tiny", process.spanContext().traceId);
    expect(infer.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    expect(infer.spanContext().traceId).toBe(process.spanContext().traceId);
    expect(infer.attributes).toMatchObject({
      [ATTR.modelName]: "tiny",
      [ATTR.modelVersion]: "abc123def456",
      [ATTR.modelItems]: 3,
      [ATTR.modelTokens]: 30,
    });

    const commit = t.named(spans, "commit in", process.spanContext().traceId);
    expect(commit.parentSpanContext?.spanId).toBe(process.spanContext().spanId);
    expect(commit.kind).toBe(SpanKind.PRODUCER);
    expect(commit.events.map((e) => e.name)).toEqual(["sent"]);
    expect(commit.attributes).toMatchObject({
      [ATTR.messagingOperationType]: "settle",
      [ATTR.messagingOperationName]: "commit",
      [ATTR.messagingBatchMessageCount]: 3,
      [ATTR.transactionOutcome]: "committed",
    });

    // Each request's own trace: process (linked to the batch) ⊃ infer (linked to the call), and
    // commit (linked to the transaction), children of the request span, timed like the originals.
    for (const request of requests) {
      const trace = request.spanContext().traceId;
      const own = t.named(spans, "process in", trace);
      expect(own.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
      expect(own.links.map((l) => l.context.spanId)).toEqual([process.spanContext().spanId]);
      expect(own.attributes).toMatchObject({
        [ATTR.flushReason]: "size",
        [ATTR.messagingBatchMessageCount]: 3,
      });
      const ownInfer = t.named(spans, "infer tiny", trace);
      expect(ownInfer.parentSpanContext?.spanId).toBe(own.spanContext().spanId);
      expect(ownInfer.links.map((l) => l.context.spanId)).toEqual([infer.spanContext().spanId]);
      expect(ownInfer.attributes).toMatchObject({ [ATTR.modelItems]: 3, [ATTR.modelName]: "tiny" });
      const ownCommit = t.named(spans, "commit in", trace);
      expect(ownCommit.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
      expect(ownCommit.kind).toBe(SpanKind.PRODUCER);
      expect(ownCommit.links.map((l) => l.context.spanId)).toEqual([commit.spanContext().spanId]);
      expect(ownCommit.attributes[ATTR.transactionOutcome]).toBe("committed");
      expect(ownCommit.events.map((e) => e.name)).toEqual(["sent"]);
    }

    const everything = allAttributeValues(spans).join("\n");
    expect(everything).not.toContain(PAYLOAD);
    expect(spans.every((s) => s.resource.attributes["service.name"] === "sluice")).toBe(true);
    await t.tracing.shutdown();
  });

  it("an unsampled request gets no child spans; an expired one no model call of its own", async () => {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const unsampled = tracer.startRequest(
      "in",
      0,
      record("1", { traceparent: `00-${TRACE_A}-${SPAN_A}-00` }),
      "online",
    );
    const expired = tracer.startRequest("in", 0, record("2"), "online");
    const items = [{ span: unsampled }, { span: expired }];
    const batch = tracer.startBatch("online", "size", items);
    expired.completed({ outcome: "result", status: "expired" });
    batch.modelCall(model, 1, 3).end();
    unsampled.completed({ outcome: "result", status: "ok" });
    batch.end();
    tracer.startTransaction("in", 0, items).commit();
    const spans = await t.finished();
    expect(spans.filter((s) => s.spanContext().traceId === TRACE_A)).toEqual([]);
    const trace = spans.find((s) => s.name === "request in")!.spanContext().traceId;
    expect(
      spans
        .filter((s) => s.spanContext().traceId === trace)
        .map((s) => s.name)
        .sort(),
    ).toEqual(["commit in", "process in", "request in"]);
  });

  it("a transaction over two micro-batches hangs from the first and links the second", async () => {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const a = [{ span: tracer.startRequest("in", 0, record("1"), "online") }];
    const b = [{ span: tracer.startRequest("in", 0, record("2"), "online") }];
    const first = tracer.startBatch("online", "wait", a);
    first.end();
    const second = tracer.startBatch("online", "deadline", b);
    second.end();
    const tx = tracer.startTransaction("in", 0, [...a, ...b]);
    tx.commit();
    const spans = await t.finished();
    const batches = spans.filter((s) => s.name === "process in" && s.parentSpanContext === undefined);
    const byReason = (reason: string) => batches.find((s) => s.attributes[ATTR.flushReason] === reason)!;
    const commit = t.named(spans, "commit in", byReason("wait").spanContext().traceId);
    expect(commit.parentSpanContext?.spanId).toBe(byReason("wait").spanContext().spanId);
    expect(commit.links.map((l) => l.context.spanId)).toEqual([byReason("deadline").spanContext().spanId]);
    expect(spans.filter((s) => s.name === "request in")).toHaveLength(2);
  });

  it("an aborted transaction ends with error status and leaves its requests open until they are given up", async () => {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const items = [{ span: tracer.startRequest("in", 1, record("7"), "online") }];
    tracer.startBatch("online", "size", items).end();
    items[0]!.span.completed({ outcome: "result", status: "ok" });
    tracer.startTransaction("in", 1, items).abort("fenced", "PRODUCER_FENCED");
    let spans = await t.finished();
    // The batch's process and commit, and the request's own copies (the request span stays open).
    expect(spans.map((s) => s.name).sort()).toEqual(["commit in", "commit in", "process in", "process in"]);
    for (const commit of spans.filter((s) => s.name === "commit in")) {
      expect(commit.status).toEqual({ code: SpanStatusCode.ERROR, message: "fenced PRODUCER_FENCED" });
      expect(commit.attributes).toMatchObject({
        [ATTR.transactionOutcome]: "fenced",
        [ATTR.errorCode]: "PRODUCER_FENCED",
      });
    }

    items[0]!.span.abort("PRODUCER_FENCED");
    items[0]!.span.commit(); // already ended: ignored
    spans = await t.finished();
    const request = t.named(spans, "request in");
    expect(request.status).toEqual({ code: SpanStatusCode.ERROR, message: "aborted PRODUCER_FENCED" });
    expect(request.attributes[ATTR.commitMs]).toBeUndefined();
  });

  it("records only codes: a message passed where a code goes becomes UNKNOWN", async () => {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const span = tracer.startRequest("in", 0, record("9"), "online");
    span.completed({
      outcome: "dead_letter",
      errorCode: `bad text ${PAYLOAD}`,
      deadLetter: { stage: PAYLOAD },
    });
    span.abort(`failed on ${PAYLOAD}`);
    const batch = tracer.startBatch("online", PAYLOAD, [{ span }]);
    batch.modelCall(undefined, 1, 0).end(PAYLOAD);
    batch.end(PAYLOAD);
    const spans = await t.finished();
    expect(allAttributeValues(spans).join("\n")).not.toContain(PAYLOAD);
    expect(t.named(spans, "request in").attributes[ATTR.errorCode]).toBe("UNKNOWN");
    // Completed before the call: the call is the batch's only (no copy in the request's trace).
    expect(t.named(spans, "infer").status.message).toBe("UNKNOWN");
  });

  it("backfill requests carry their run id; a batch of several topics is named process", async () => {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const items = [
      {
        span: tracer.startRequest(
          "bf.a",
          0,
          record("5", { "sluice.run-id": Buffer.from("run-42") }),
          "backfill",
        ),
      },
      { span: tracer.startRequest("bf.b", 3, record("6"), "backfill") },
    ];
    tracer.startBatch("backfill", "fill", items).end();
    for (const item of items) item.span.commit();
    const spans = await t.finished();
    const process = spans.find((s) => s.name === "process" && s.parentSpanContext === undefined)!;
    expect(spans.filter((s) => s.name === "process")).toHaveLength(3);
    expect(process.attributes[ATTR.messagingDestinationName]).toBeUndefined();
    expect(process.attributes[ATTR.messagingDestinationPartitionId]).toBeUndefined();
    expect(process.attributes[ATTR.lane]).toBe("backfill");
    expect(t.named(spans, "request bf.a").attributes[ATTR.runId]).toBe("run-42");
    expect(t.named(spans, "request bf.b").attributes[ATTR.runId]).toBeUndefined();
  });

  it("resource: service name and version, instance id, resource attributes", async () => {
    const t = await inMemoryTracing(
      { serviceName: "embedder", resourceAttributes: { "deployment.environment.name": "test" } },
      { instanceId: "host-1", serviceVersion: "9.9.9" },
    );
    t.tracing.tracer.startRequest("in", 0, record("1"), "online").commit();
    const [span] = await t.finished();
    expect(span!.resource.attributes).toMatchObject({
      "service.name": "embedder",
      "service.version": "9.9.9",
      "service.instance.id": "host-1",
      "deployment.environment.name": "test",
      "telemetry.sdk.language": "nodejs",
    });
    expect(Object.keys(span!.resource.attributes).filter((k) => k.startsWith("process."))).toEqual([]);
  });
});
