import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { tracingSchema } from "../../../src/config/tracing-config-schema.js";
import { createTracing } from "../../../src/tracing/tracer-factory.js";
import type { Tracing } from "../../../src/tracing/tracing.js";
import { tracingSettings } from "../../../src/tracing/tracing-settings.js";

/** A port nothing listens on: bound once, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A collector that accepts connections and never answers. */
async function silentCollector(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const QUEUE = 50;
const BATCH = 10;
const SPANS = 5000;

async function tracingTo(exporter: "zipkin" | "otlp", url: string) {
  const settings = tracingSettings(
    tracingSchema.parse({
      exporter,
      endpoint: url,
      maxQueueSize: QUEUE,
      maxExportBatchSize: BATCH,
      scheduledDelayMs: 1,
      exportTimeoutMs: 500,
    }),
    {},
  );
  return createTracing(settings, { serviceVersion: "0.0.0-test" });
}

/** Ends SPANS request spans as fast as the loop goes; returns how long it took, ms. */
function endMany(tracing: Tracing): number {
  const started = performance.now();
  for (let i = 0; i < SPANS; i++) {
    const span = tracing.tracer.startRequest("in", 0, { offset: String(i) }, "online");
    span.completed({ outcome: "result", status: "ok" });
    span.commit();
  }
  return performance.now() - started;
}

/** Waits until no export is in flight (each answers or times out within the export timeout). */
async function settled(tracing: Tracing) {
  const deadline = Date.now() + 10_000;
  while (tracing.stats().exporting > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  return tracing.stats();
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe("a collector that is down never holds up the pipeline", () => {
  it.each(["zipkin", "otlp"] as const)(
    "%s at a closed port: spans beyond the queue are dropped and counted, failed exports counted",
    async (exporter) => {
      const port = await closedPort();
      const path = exporter === "zipkin" ? "/api/v2/spans" : "/v1/traces";
      const tracing = await tracingTo(exporter, `http://127.0.0.1:${port}${path}`);
      cleanups.push(() => tracing.shutdown());

      const elapsed = endMany(tracing);
      const during = tracing.stats();
      // Synchronous and cheap: nothing waits for the network (5000 spans in well under a second even on a busy machine).
      expect(elapsed).toBeLessThan(2000);
      expect(during.queued).toBeLessThanOrEqual(QUEUE);
      // One export of BATCH starts as the queue first fills; then the queue stays full and the rest is dropped.
      expect(during.dropped).toBeGreaterThanOrEqual(SPANS - QUEUE - BATCH);
      expect(during.dropped + during.queued + during.exporting).toBe(SPANS);

      const flushStarted = performance.now();
      await tracing.forceFlush();
      expect(performance.now() - flushStarted).toBeLessThan(5000);
      const after = await settled(tracing);
      expect(after.exported).toBe(0);
      expect(after.failedExports).toBeGreaterThanOrEqual(1);
      expect(after.failedSpans).toBeGreaterThanOrEqual(BATCH);
      expect(after.failedSpans + after.dropped + after.queued + after.exporting).toBe(SPANS);

      const shutdownStarted = performance.now();
      await tracing.shutdown();
      expect(performance.now() - shutdownStarted).toBeLessThan(5000);
    },
  );

  it("a collector that never answers: each export is counted failed after the export timeout", async () => {
    const collector = await silentCollector();
    cleanups.push(() => collector.close());
    const tracing = await tracingTo("zipkin", `http://127.0.0.1:${collector.port}/api/v2/spans`);
    cleanups.push(() => tracing.shutdown());

    expect(endMany(tracing)).toBeLessThan(2000);
    await tracing.forceFlush();
    const stats = await settled(tracing);
    expect(stats.exported).toBe(0);
    expect(stats.failedExports).toBeGreaterThanOrEqual(1);
    expect(stats.failedSpans + stats.dropped + stats.queued + stats.exporting).toBe(SPANS);
  });
});
