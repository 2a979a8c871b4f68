import { Counter, Gauge, type Registry } from "prom-client";

/**
 * What a span export queue reports (the port the tracing metrics read at each scrape; the tracing
 * room's `Tracing.stats()` fits it, so observability needs nothing of src/tracing): cumulative
 * counts since start, and the spans waiting now.
 */
export interface SpanExportCounts {
  queued: number;
  exported: number;
  dropped: number;
  failedExports: number;
  failedSpans: number;
}

/**
 * Registers the span export queue's metrics (docs/observability.md, "Tracing"), read from `counts`
 * at each scrape: `sluice_tracing_spans_total{outcome="exported"|"dropped"|"failed"}` (dropped: the
 * queue was full; failed: lost in a failed export), `sluice_tracing_export_failures_total` and the
 * `sluice_tracing_queued_spans` gauge.
 */
export function registerSpanExportMetrics(registry: Registry, counts: () => SpanExportCounts): void {
  const registers = [registry];
  new Counter({
    name: "sluice_tracing_spans_total",
    help: "Ended spans by what became of them: exported, dropped (export queue full: a slow or dead collector) or failed (lost in a failed export).",
    labelNames: ["outcome"],
    registers,
    collect() {
      const c = counts();
      this.reset();
      this.inc({ outcome: "exported" }, c.exported);
      this.inc({ outcome: "dropped" }, c.dropped);
      this.inc({ outcome: "failed" }, c.failedSpans);
    },
  });
  new Counter({
    name: "sluice_tracing_export_failures_total",
    help: "Span export requests that failed (refused, unreachable, or no answer within tracing.exportTimeoutMs).",
    registers,
    collect() {
      this.reset();
      this.inc(counts().failedExports);
    },
  });
  new Gauge({
    name: "sluice_tracing_queued_spans",
    help: "Ended spans waiting for export now (at most tracing.maxQueueSize).",
    registers,
    collect() {
      this.set(counts().queued);
    },
  });
}
