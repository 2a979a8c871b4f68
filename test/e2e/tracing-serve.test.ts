import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/config/project-paths.js";
import { LocalZipkin } from "../../src/devtools/local-zipkin.js";
import { createTopics, produceMessages, uniqueName } from "../support/kafka-harness.js";
import {
  killLeftovers,
  type MetricSample,
  metricsUrlOf,
  type ReadRecord,
  readCommitted,
  resultIds,
  type ServeProcess,
  scrapeMetrics,
  serveEnv,
  startServe,
  stopServe,
} from "../support/serve-process.js";
import { createTinyModel, tinyModelEnv } from "../support/tiny-onnx.js";
import { type ZipkinSpan, zipkinJson } from "../support/zipkin-api.js";

/**
 * Issue 32 end to end: the real `sluice serve` (child process, real Kafka, the tiny generated model)
 * exporting to a real Zipkin (the one `sluice zipkin start` runs, in a temp run folder, started once
 * for this file). Requests with and without a `traceparent`: every result a read_committed reader
 * sees carries a `traceparent` of its request's trace, and that trace in Zipkin holds Sluice's
 * request, micro-batch, model-call and transaction spans; no payload text in any span. Then a
 * collector that is down: every result still arrives, spans are dropped and counted on /metrics.
 */

const CANARY = `canary${randomBytes(6).toString("hex")}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const hex = (bytes: number) => randomBytes(bytes).toString("hex");

let dir: string;
let zipkin: LocalZipkin;
let api: string;
let spansEndpoint: string;
let modelEnv: Record<string, string>;
const procs: ServeProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tracing-serve-"));
  modelEnv = tinyModelEnv(await createTinyModel(dir, { task: "embedding" }));
  zipkin = new LocalZipkin({
    runDir: join(dir, "zipkin"),
    port: 0,
    cacheDir: join(packageRoot(), ".sluice", "cache"),
    onProgress: (message) => console.log(`[test zipkin] ${message}`),
  });
  const status = await zipkin.start();
  api = status.url!;
  spansEndpoint = status.spansEndpoint!;
}, 180_000);

afterEach(() => killLeftovers(procs));

afterAll(async () => {
  await zipkin?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const getJson = <T>(path: string): Promise<T> => zipkinJson<T>(api, path);

/** Polls Zipkin until `accept` holds for the trace (Zipkin stores what it accepted asynchronously). */
async function traceUntil(traceId: string, accept: (spans: ZipkinSpan[]) => boolean): Promise<ZipkinSpan[]> {
  const deadline = Date.now() + 30_000;
  let spans: ZipkinSpan[] = [];
  while (Date.now() < deadline) {
    spans = await getJson<ZipkinSpan[]>(`/api/v2/trace/${traceId}`).catch(() => []);
    if (accept(spans)) return spans;
    await sleep(250);
  }
  throw new Error(`trace ${traceId} in Zipkin: ${spans.map((s) => s.name).join(", ") || "nothing"}`);
}

/** `00-<trace>-<span>-<flags>` of a record's traceparent header. */
function traceparentOf(record: ReadRecord): { traceId: string; spanId: string; flags: string } {
  const raw = record.headers.traceparent;
  expect(raw, `traceparent of ${record.key}`).toBeDefined();
  const [version, traceId, spanId, flags] = String(raw).split("-");
  expect(version).toBe("00");
  return { traceId: traceId!, spanId: spanId!, flags: flags! };
}

function value(samples: MetricSample[], name: string, labels: Record<string, string> = {}): number {
  const hit = samples.find(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return hit?.value ?? Number.NaN;
}

function start(base: string, extra: Record<string, string>): ServeProcess {
  const p = startServe(
    [],
    serveEnv(base, {
      ...modelEnv,
      SLUICE_DELIVERY__COMMIT_INTERVAL_MS: "100",
      // Never mind the developer's shell: these tests set every tracing variable they mean.
      OTEL_SDK_DISABLED: "",
      OTEL_TRACES_SAMPLER: "",
      OTEL_RESOURCE_ATTRIBUTES: "",
      ...extra,
    }),
  );
  procs.push(p);
  return p;
}

describe("tracing in a real `sluice serve`", () => {
  it("every result carries its request's trace, and that trace holds Sluice's spans in Zipkin", async () => {
    const base = uniqueName("trace-serve");
    const topic = `${base}.requests`;
    const service = `sluice-e2e-${hex(4)}`;
    await createTopics([{ topic, numPartitions: 2 }]);
    const serve = start(base, {
      OTEL_TRACES_EXPORTER: "zipkin",
      OTEL_EXPORTER_ZIPKIN_ENDPOINT: spansEndpoint,
      OTEL_SERVICE_NAME: service,
      OTEL_BSP_SCHEDULE_DELAY: "200",
    });
    await serve.waitFor(/sluice serve running/);

    // Half the requests come with a producer's trace context, half without; two are malformed.
    const producerSpans = new Map<string, { traceId: string; spanId: string }>();
    const messages: { key: string; value: Buffer; headers?: Record<string, string> }[] = [];
    for (let i = 0; i < 20; i++) {
      const id = `r-${i}`;
      const body = JSON.stringify({ id, text: `the cat ${CANARY}`, attributes: { note: CANARY } });
      if (i % 2 === 0) {
        const parent = { traceId: hex(16), spanId: hex(8) };
        producerSpans.set(id, parent);
        messages.push({
          key: id,
          value: Buffer.from(body),
          headers: { traceparent: `00-${parent.traceId}-${parent.spanId}-01`, tracestate: "vendor=e2e" },
        });
      } else messages.push({ key: id, value: Buffer.from(body) });
    }
    const badParent = { traceId: hex(16), spanId: hex(8) };
    messages.push({
      key: `bad-${CANARY}`,
      value: Buffer.from(`{broken ${CANARY}`),
      headers: { traceparent: `00-${badParent.traceId}-${badParent.spanId}-01` },
    });
    messages.push({ key: "bad-2", value: Buffer.from("{broken") });
    await produceMessages(topic, messages);

    const results = await readCommitted(`${base}.results`, { expected: 20 });
    const deadLetters = await readCommitted(`${base}.dlq`, { expected: 2 });
    expect(resultIds(results).sort()).toEqual(
      messages
        .slice(0, 20)
        .map((m) => m.key)
        .sort(),
    );
    expect(deadLetters).toHaveLength(2);

    // Each result names its request span; a traced request's result stays in the producer's trace.
    const requestSpanOf = new Map<string, { traceId: string; spanId: string }>();
    for (const record of results) {
      const tp = traceparentOf(record);
      expect(tp.flags).toBe("01");
      const parent = producerSpans.get(record.key!);
      if (parent) {
        expect(tp.traceId).toBe(parent.traceId);
        expect(tp.spanId).not.toBe(parent.spanId);
        expect(String(record.headers.tracestate)).toBe("vendor=e2e");
      } else {
        expect([...producerSpans.values()].map((p) => p.traceId)).not.toContain(tp.traceId);
      }
      requestSpanOf.set(record.key!, tp);
    }
    // Requests without a context each started a trace of their own.
    const fresh = [...requestSpanOf].filter(([id]) => !producerSpans.has(id)).map(([, tp]) => tp.traceId);
    expect(new Set(fresh).size).toBe(10);

    const names = {
      request: `request ${topic}`,
      process: `process ${topic}`,
      infer: "infer tiny",
      commit: `commit ${topic}`,
    };
    for (const [id, tp] of requestSpanOf) {
      const spans = await traceUntil(tp.traceId, (s) =>
        Object.values(names).every((n) => s.some((span) => span.name === n)),
      );
      const request = spans.find((s) => s.id === tp.spanId);
      expect(request?.name, id).toBe(names.request);
      expect(request?.kind).toBe("CONSUMER");
      expect(request?.parentId).toBe(producerSpans.get(id)?.spanId);
      expect(request?.tags).toMatchObject({
        "messaging.system": "kafka",
        "messaging.destination.name": topic,
        "messaging.consumer.group.name": `${base}-group`,
        "sluice.lane": "online",
        "sluice.outcome": "result",
        "sluice.result.status": "ok",
      });
      for (const timing of ["sluice.intake_ms", "sluice.queue_ms", "sluice.inference_ms", "sluice.commit_ms"])
        expect(Number(request?.tags?.[timing]), `${id} ${timing}`).toBeGreaterThanOrEqual(0);
      const process = spans.find((s) => s.name === names.process)!;
      expect(process.parentId).toBe(request!.id);
      expect(spans.find((s) => s.name === names.infer)?.parentId).toBe(process.id);
      const commit = spans.find((s) => s.name === names.commit)!;
      expect(commit).toMatchObject({ parentId: request!.id, kind: "PRODUCER" });
      expect(commit.tags?.["sluice.transaction.outcome"]).toBe("committed");
    }

    // A dead letter points at its request span too, in the producer's trace when it came with one.
    const traced = deadLetters.find((r) => r.key === `bad-${CANARY}`)!;
    const dlTrace = traceparentOf(traced);
    expect(dlTrace.traceId).toBe(badParent.traceId);
    const dlSpans = await traceUntil(dlTrace.traceId, (s) => s.some((span) => span.name === names.commit));
    expect(dlSpans.find((s) => s.id === dlTrace.spanId)?.tags).toMatchObject({
      "sluice.outcome": "dead_letter",
      "sluice.error.code": "DECODE_FAILED",
      "sluice.dead_letter.stage": "decode",
    });

    // The micro-batches' own traces: process → infer, commit.
    const all = (await getJson<ZipkinSpan[][]>(`/api/v2/traces?serviceName=${service}&limit=1000`)).flat();
    const batches = all.filter((s) => s.name === names.process && s.parentId === undefined);
    expect(batches.length).toBeGreaterThan(0);
    expect(all.some((s) => s.name === names.infer && batches.some((b) => b.id === s.parentId))).toBe(true);
    // Never a payload: not in a name, a tag or an annotation.
    expect(JSON.stringify(all)).not.toContain(CANARY);

    const metrics = await scrapeMetrics(metricsUrlOf(serve));
    expect(value(metrics, "sluice_tracing_spans_total", { outcome: "exported" })).toBeGreaterThan(0);
    expect(value(metrics, "sluice_tracing_spans_total", { outcome: "dropped" })).toBe(0);
    expect(value(metrics, "sluice_tracing_export_failures_total")).toBe(0);
    await stopServe(serve);
  }, 180_000);

  it("a collector that is down: every result arrives as without tracing, spans are dropped and counted", async () => {
    // A port nothing listens on: every export is refused at once.
    const closed = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const base = uniqueName("trace-down");
    const topic = `${base}.requests`;
    await createTopics([{ topic, numPartitions: 2 }]);
    const serve = start(base, {
      OTEL_TRACES_EXPORTER: "zipkin",
      OTEL_EXPORTER_ZIPKIN_ENDPOINT: `http://127.0.0.1:${closed}/api/v2/spans`,
      OTEL_BSP_MAX_QUEUE_SIZE: "64",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "32",
      OTEL_BSP_SCHEDULE_DELAY: "1000",
    });
    await serve.waitFor(/sluice serve running/);
    const n = 600;
    const started = Date.now();
    await produceMessages(
      topic,
      Array.from({ length: n }, (_, i) => ({
        key: `d-${i}`,
        value: Buffer.from(JSON.stringify({ id: `d-${i}`, text: `the dog sat ${i}` })),
      })),
    );
    const results = await readCommitted(`${base}.results`, { expected: n, timeoutMs: 60_000 });
    const seconds = (Date.now() - started) / 1000;
    expect(new Set(resultIds(results)).size).toBe(n);
    // Generous: the tiny model drains this in a few seconds on a loaded 2-core machine.
    expect(seconds).toBeLessThan(45);
    for (const record of results.slice(0, 20)) traceparentOf(record);

    const url = metricsUrlOf(serve);
    let metrics: MetricSample[] = [];
    for (let i = 0; i < 40; i++) {
      metrics = await scrapeMetrics(url);
      if (value(metrics, "sluice_tracing_export_failures_total") > 0) break;
      await sleep(250);
    }
    expect(value(metrics, "sluice_tracing_spans_total", { outcome: "dropped" })).toBeGreaterThan(0);
    expect(value(metrics, "sluice_tracing_export_failures_total")).toBeGreaterThan(0);
    expect(value(metrics, "sluice_tracing_spans_total", { outcome: "exported" })).toBe(0);
    expect(value(metrics, "sluice_tracing_queued_spans")).toBeLessThanOrEqual(64);
    // Shutdown is not held up by the dead collector either.
    const stopping = Date.now();
    await stopServe(serve);
    expect(Date.now() - stopping).toBeLessThan(20_000);
  }, 180_000);
});
