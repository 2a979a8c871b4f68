import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/config/project-paths.js";
import { tracingSchema } from "../../src/config/tracing-config-schema.js";
import { LocalZipkin } from "../../src/devtools/local-zipkin.js";
import { createTracing } from "../../src/tracing/tracer-factory.js";
import type { Tracing } from "../../src/tracing/tracing.js";
import { tracingSettings } from "../../src/tracing/tracing-settings.js";
import { type ZipkinSpan, zipkinJson } from "../support/zipkin-api.js";

/**
 * The tracing room against a real Zipkin (the one `sluice zipkin start` runs, in a temp run folder,
 * once for this file): spans exported through the tracer factory with OTEL_TRACES_EXPORTER=zipkin
 * are read back from Zipkin's API with their names, tags and parent ids. Zipkin keeps no span
 * links (the unit tests check those with the SDK's InMemorySpanExporter).
 */

const PAYLOAD = `canary-${randomBytes(6).toString("hex")}`;
const SERVICE = `sluice-test-${randomBytes(4).toString("hex")}`;
const TOPIC = "sluice.requests";
const PRODUCER_TRACE = randomBytes(16).toString("hex");
const PRODUCER_SPAN = randomBytes(8).toString("hex");

let runDir: string;
let zipkin: LocalZipkin;
let api: string;
let tracing: Tracing;

const getJson = <T>(path: string): Promise<T> => zipkinJson<T>(api, path);

/** Polls until `read` gives at least `count` spans (Zipkin stores what it accepted asynchronously). */
async function eventually(read: () => Promise<ZipkinSpan[]>, count: number): Promise<ZipkinSpan[]> {
  const deadline = Date.now() + 15_000;
  let spans: ZipkinSpan[] = [];
  while (Date.now() < deadline) {
    spans = await read().catch(() => []);
    if (spans.length >= count) return spans;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `Zipkin has ${spans.length} spans, expected ${count}: ${spans.map((s) => s.name).join(", ")}`,
  );
}

beforeAll(async () => {
  runDir = mkdtempSync(join(tmpdir(), "sluice-test-zipkin-"));
  zipkin = new LocalZipkin({
    runDir,
    port: 0,
    cacheDir: join(packageRoot(), ".sluice", "cache"),
    onProgress: (message) => console.log(`[test zipkin] ${message}`),
  });
  const status = await zipkin.start();
  api = status.url!;
  const settings = tracingSettings(tracingSchema.parse({}), {
    OTEL_TRACES_EXPORTER: "zipkin",
    OTEL_EXPORTER_ZIPKIN_ENDPOINT: status.spansEndpoint,
    OTEL_SERVICE_NAME: SERVICE,
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test",
    OTEL_BSP_SCHEDULE_DELAY: "50",
  });
  expect(settings).toMatchObject({ enabled: true, exporter: "zipkin", endpoint: status.spansEndpoint });
  tracing = await createTracing(settings, { consumerGroup: "sluice-it", instanceId: "it-1" });
});

afterAll(async () => {
  await tracing?.shutdown();
  await zipkin?.stop();
  if (runDir) rmSync(runDir, { recursive: true, force: true });
});

describe("traces in a real Zipkin", () => {
  it("request, micro-batch, model call and transaction spans arrive with their names, tags and parents", async () => {
    const tracer = tracing.tracer;
    const payloadRecord = (offset: string, headers?: Record<string, Buffer>) => ({
      offset,
      headers,
      key: Buffer.from(PAYLOAD),
      value: Buffer.from(JSON.stringify({ id: PAYLOAD, text: PAYLOAD, attributes: { note: PAYLOAD } })),
    });
    const traced = payloadRecord("100", {
      traceparent: Buffer.from(`00-${PRODUCER_TRACE}-${PRODUCER_SPAN}-01`),
      "sluice.request-text": Buffer.from(PAYLOAD),
    });
    const items = [
      { span: tracer.startRequest(TOPIC, 1, traced, "online") },
      { span: tracer.startRequest(TOPIC, 1, payloadRecord("101"), "online") },
    ];
    for (const item of items) item.span.queued({ note: PAYLOAD });
    const rejected = { span: tracer.startRequest(TOPIC, 1, payloadRecord("102"), "online") };
    rejected.span.completed({
      outcome: "dead_letter",
      errorCode: "DECODE_FAILED",
      deadLetter: { stage: "decode" },
    });

    const batch = tracer.startBatch("online", "size", items);
    const call = batch.modelCall({ name: "tiny", version: "0123456789ab" }, 2, 12);
    call.end();
    for (const item of items) item.span.completed({ outcome: "result", status: "ok" });
    batch.end();
    const resultHeaders = items[0]!.span.traceHeaders()!;
    const tx = tracer.startTransaction(TOPIC, 1, [...items, rejected]);
    tx.sent();
    tx.commit();
    await tracing.forceFlush();
    expect(tracing.stats()).toMatchObject({ dropped: 0, failedExports: 0 });

    // The producer's trace: the request span, parented to the producer's span.
    // The producer's trace holds the request span and its own process, infer and commit children.
    const producerTrace = await eventually(() => getJson<ZipkinSpan[]>(`/api/v2/trace/${PRODUCER_TRACE}`), 4);
    const request = producerTrace.find((s) => s.name === `request ${TOPIC}`);
    const child = (name: string) => producerTrace.find((s) => s.name === name);
    expect(child(`process ${TOPIC}`)?.parentId).toBe(request?.id);
    expect(child("infer tiny")?.parentId).toBe(child(`process ${TOPIC}`)?.id);
    expect(child(`commit ${TOPIC}`)).toMatchObject({ parentId: request?.id, kind: "PRODUCER" });
    expect(request).toMatchObject({
      traceId: PRODUCER_TRACE,
      parentId: PRODUCER_SPAN,
      name: `request ${TOPIC}`,
      kind: "CONSUMER",
      localEndpoint: { serviceName: SERVICE },
    });
    expect(request!.tags).toMatchObject({
      "messaging.system": "kafka",
      "messaging.operation.type": "process",
      "messaging.destination.name": TOPIC,
      "messaging.destination.partition.id": "1",
      "messaging.consumer.group.name": "sluice-it",
      "messaging.kafka.offset": "100",
      "sluice.lane": "online",
      "sluice.outcome": "result",
      "sluice.result.status": "ok",
      "service.version": expect.any(String),
      "service.instance.id": "it-1",
      "deployment.environment.name": "test",
    });
    for (const timing of ["sluice.intake_ms", "sluice.queue_ms", "sluice.inference_ms", "sluice.commit_ms"]) {
      expect(Number(request!.tags?.[timing]), timing).toBeGreaterThanOrEqual(0);
    }
    // The result record's traceparent names this span, in the producer's trace.
    expect(resultHeaders.traceparent!.toString()).toBe(`00-${PRODUCER_TRACE}-${request!.id}-01`);

    // Everything of this service: the batch's trace (3 spans) and the three request traces (the two
    // that went to the model with process, infer and commit children, the dead letter with commit).
    const traces = await eventually(
      async () => (await getJson<ZipkinSpan[][]>(`/api/v2/traces?serviceName=${SERVICE}&limit=100`)).flat(),
      13,
    );
    // The micro-batch's own trace: the root process span, its model call and transaction.
    const process = traces.find((s) => s.name === `process ${TOPIC}` && s.parentId === undefined)!;
    const named = (name: string) => {
      const found = traces.filter((s) => s.name === name && s.traceId === process.traceId);
      expect(found.length, name).toBe(1);
      return found[0]!;
    };
    expect(process.kind).toBe("CONSUMER");
    expect(process.tags).toMatchObject({
      "messaging.batch.message_count": "2",
      "messaging.destination.name": TOPIC,
      "sluice.batch.flush_reason": "size",
    });
    const infer = named("infer tiny");
    expect(infer).toMatchObject({ traceId: process.traceId, parentId: process.id });
    expect(infer.tags).toMatchObject({ "sluice.model.items": "2", "sluice.model.tokens": "12" });
    const commit = named(`commit ${TOPIC}`);
    expect(commit).toMatchObject({ traceId: process.traceId, parentId: process.id, kind: "PRODUCER" });
    expect(commit.tags).toMatchObject({
      "sluice.transaction.outcome": "committed",
      "messaging.batch.message_count": "3",
    });
    expect(commit.annotations?.map((a) => a.value)).toEqual(["sent"]);

    const requests = traces.filter((s) => s.name === `request ${TOPIC}`);
    expect(requests.map((s) => s.tags?.["messaging.kafka.offset"]).sort()).toEqual(["100", "101", "102"]);
    const deadLetter = requests.find((s) => s.tags?.["messaging.kafka.offset"] === "102")!;
    expect(deadLetter.parentId).toBeUndefined();
    expect(deadLetter.tags).toMatchObject({
      "sluice.outcome": "dead_letter",
      "sluice.error.code": "DECODE_FAILED",
      "otel.status_code": "ERROR",
      error: "dead letter DECODE_FAILED",
    });

    // Never a payload: not in a name, a tag, an annotation.
    const everything = JSON.stringify(await getJson(`/api/v2/traces?serviceName=${SERVICE}&limit=100`));
    expect(everything).not.toContain(PAYLOAD);
    expect(JSON.stringify(await getJson(`/api/v2/trace/${PRODUCER_TRACE}`))).not.toContain(PAYLOAD);
  });
});
