import { execFileSync } from "node:child_process";
import { PerformanceObserver } from "node:perf_hooks";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { IHeaders } from "kafkajs";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import { NO_TRACING_TRACER } from "../../../src/tracing/pipeline-tracer.js";
import { createTracing } from "../../../src/tracing/tracer-factory.js";
import { NO_TRACING } from "../../../src/tracing/tracing.js";
import { tracingOff } from "../../../src/tracing/tracing-settings.js";

describe("tracing off", () => {
  it("builds nothing: no provider, no exporter, the shared do-nothing tracer", async () => {
    const tracing = await createTracing(tracingOff());
    expect(tracing).toBe(NO_TRACING);
    expect(tracing.enabled).toBe(false);
    expect(tracing.tracer).toBe(NO_TRACING_TRACER);
    expect(Object.values(tracing.stats()).every((count) => count === 0)).toBe(true);
    await expect(tracing.forceFlush()).resolves.toBeUndefined();
    await expect(tracing.shutdown()).resolves.toBeUndefined();
  });

  it("allocates no spans and reads no headers: every call returns the same frozen object", () => {
    const tracer = NO_TRACING_TRACER;
    // Reading a header would throw: the no-op path must not even look at them.
    const headers = new Proxy({} as IHeaders, {
      get: () => {
        throw new Error("headers read while tracing is off");
      },
    });
    const record = { offset: "1", headers };
    const first = tracer.startRequest("t", 0, record, "online");
    const items = [{ span: first }];
    const batch = tracer.startBatch("online", "size", items);
    const call = batch.modelCall({ name: "m", version: "v" }, 1, 1);
    const tx = tracer.startTransaction("t", 0, items);
    for (let i = 0; i < 1000; i++) {
      expect(tracer.startRequest("t", i, record, "backfill")).toBe(first);
      expect(tracer.startBatch("online", "wait", items)).toBe(batch);
      expect(batch.modelCall(undefined, i, i)).toBe(call);
      expect(tracer.startTransaction("t", i, items)).toBe(tx);
    }
    first.queued({ a: "b" });
    first.completed({ outcome: "result", status: "ok" });
    expect(first.traceHeaders()).toBeUndefined();
    first.commit();
    first.abort("X");
    call.end();
    batch.end("X");
    tx.sent();
    tx.commit();
    tx.abort("failed");
    for (const object of [tracer, first, batch, call, tx]) expect(Object.isFrozen(object)).toBe(true);
  });

  it("loads no OpenTelemetry code at all; tracing on loads the SDK (a fresh process)", () => {
    const script = `
      import { createRequire } from "node:module";
      const { createTracing, tracingOff, tracingSettings } = await import("./src/tracing/index.ts");
      const { tracingSchema } = await import("./src/config/tracing-config-schema.ts");
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).filter((k) => k.includes("@opentelemetry")).length;
      await createTracing(tracingOff());
      const off = loaded();
      const on = await createTracing(tracingSettings(tracingSchema.parse({ exporter: "console" }), {}));
      console.log(JSON.stringify({ off, on: loaded() }));
      await on.shutdown();`;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: packageRoot(),
      encoding: "utf8",
    });
    const { off, on } = JSON.parse(out.trim().split("\n").at(-1)!) as { off: number; on: number };
    expect(off).toBe(0);
    expect(on).toBeGreaterThan(0);
  });

  it("measured: the calls the pipeline makes per record allocate nothing with the no-op tracer", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const tracer = NO_TRACING_TRACER;
    // What the wiring passes: objects the pipeline already holds (record, items, completion).
    const record = { offset: "7", headers: { traceparent: Buffer.from("x") } };
    const items = [{ span: tracer.startRequest("t", 0, record, "online") }];
    const completion = { outcome: "result", status: "ok" } as const;
    const attributes = { tenant: "a" };
    const model = { name: "m", version: "v" };
    const perRecord = (allocate: boolean): unknown => {
      const span = tracer.startRequest("t", 0, record, "online"); // intake
      span.queued(attributes);
      const batch = tracer.startBatch("online", "size", items); // dispatch
      const call = batch.modelCall(model, 1, 3);
      call.end(undefined);
      span.completed(completion);
      const headers = span.traceHeaders(); // the result record
      batch.end();
      const tx = tracer.startTransaction("t", 0, items); // the committer
      tx.sent();
      tx.commit();
      span.abort("PARTITION_CLOSED");
      return allocate ? { ...completion, headers } : headers;
    };
    /** Heap growth and garbage collections over `n` records. */
    const measure = async (n: number, allocate: boolean) => {
      let collections = 0;
      const observer = new PerformanceObserver((list) => {
        collections += list.getEntries().length;
      });
      gc();
      observer.observe({ entryTypes: ["gc"] });
      const before = process.memoryUsage().heapUsed;
      let sink: unknown;
      for (let i = 0; i < n; i++) sink = perRecord(allocate);
      const grown = process.memoryUsage().heapUsed - before;
      await new Promise((resolve) => setTimeout(resolve, 20)); // gc entries arrive asynchronously
      observer.disconnect();
      return { grown, collections, sink };
    };
    for (let i = 0; i < 20_000; i++) perRecord(false); // optimised first, as on the hot path
    // 1M records: one 16-byte object each would be 16 MB, more than the young generation holds, so
    // any allocation shows as a collection; the heap's growth is a second look (noise: ~100 KB).
    // The heap also holds code the optimising compiler installs while the loop runs (a few hundred
    // KB at times), so the growth bound takes the least of three runs; every run must collect nothing.
    const n = 1_000_000;
    const runs = [await measure(n, false), await measure(n, false), await measure(n, false)];
    // The measurement sees allocation: the same loop with one small object per record.
    const control = await measure(n, true);
    expect(control.grown > 1_000_000 || control.collections > 0).toBe(true);
    expect(runs.map((run) => run.collections)).toEqual([0, 0, 0]);
    expect(Math.min(...runs.map((run) => run.grown))).toBeLessThan(n / 4); // under a quarter of a byte per record
  });

  it("a result built with the no-op span keeps its encoded headers object (nothing copied)", () => {
    const headers = { "content-type": "application/json" };
    const builder = new CompletionBuilder({
      resultsTopic: "res",
      deadLetterTopic: "dlq",
      encodeResult: () => ({ value: Buffer.from("{}"), headers }),
      maxDeadLetterBytes: 10_000,
    });
    const span = NO_TRACING_TRACER.startRequest("t", 0, { offset: "1" }, "online");
    const completion = builder.outcome(
      { topic: "t", partition: 0, offset: "1", key: null, value: null, timestamp: "0" },
      {
        request: { id: "a", text: "x" },
        source: { topic: "t", partition: 0, offset: "1" },
        requestTimestamp: 0,
        model: { name: "m", version: "v" },
        queueMs: 0,
        inferenceMs: 0,
        batchSize: 1,
        completedAt: 0,
      },
      { ok: true, output: { embedding: [0] }, tokens: 1, truncated: false },
      undefined,
      span,
    );
    expect(completion.outputs[0]?.headers).toBe(headers);
    expect(completion.span).toBe(span);
  });
});
