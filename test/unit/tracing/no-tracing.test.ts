import { execFileSync } from "node:child_process";
import type { IHeaders } from "kafkajs";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../../src/config/project-paths.js";
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
});
