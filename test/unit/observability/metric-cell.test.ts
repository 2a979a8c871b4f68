import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { CounterCell, HistogramCell } from "../../../src/observability/metric-cell.js";

// A cell writes into prom-client's own series entry (src/observability/metric-cell.ts). The same
// generated calls go once through prom-client and once through cells; the exposition texts must be equal.

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function metrics(registry: Registry) {
  const histogram = new Histogram({
    name: "test_seconds",
    help: "h",
    labelNames: ["status", "lane"] as const,
    buckets: BUCKETS,
    registers: [registry],
  });
  const counter = new Counter({
    name: "test_total",
    help: "c",
    labelNames: ["outcome", "lane"] as const,
    registers: [registry],
  });
  return { histogram, counter };
}

/** A fixed pseudo-random sequence (the values land in every bucket, on bounds and past the last). */
function values(n: number): number[] {
  let x = 12345;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    const r = x / 2 ** 31;
    out.push(i % 17 === 0 ? (BUCKETS[i % BUCKETS.length] as number) : i % 23 === 0 ? 20 : r * r * 3);
  }
  return out;
}

const LABELS = [
  { status: "ok", lane: "online" },
  { status: "expired", lane: "backfill" },
  { status: 'odd "value"\n', lane: "online" },
];

describe("metric cells", () => {
  it("give the same exposition as prom-client's own calls, also after a reset", async () => {
    const plainRegistry = new Registry();
    const cellRegistry = new Registry();
    const plain = metrics(plainRegistry);
    const viaCells = metrics(cellRegistry);
    const histogramCells = LABELS.map((l) => new HistogramCell(viaCells.histogram, l));
    const counterCells = LABELS.map(
      (l) => new CounterCell(viaCells.counter, { outcome: l.status, lane: l.lane }),
    );
    const feed = (vs: number[]) =>
      vs.forEach((v, i) => {
        const k = i % LABELS.length;
        const labels = LABELS[k] as { status: string; lane: string };
        plain.histogram.observe(labels, v);
        plain.counter.inc({ outcome: labels.status, lane: labels.lane }, i % 5);
        histogramCells[k]?.observe(v);
        counterCells[k]?.inc(i % 5);
      });

    feed(values(2000));
    expect(await cellRegistry.metrics()).toBe(await plainRegistry.metrics());
    expect(await cellRegistry.metrics()).toContain(
      'test_seconds_bucket{le="+Inf",status="ok",lane="online"}',
    );

    plainRegistry.resetMetrics();
    cellRegistry.resetMetrics();
    feed(values(700));
    expect(await cellRegistry.metrics()).toBe(await plainRegistry.metrics());
  });

  it("go through prom-client only for their first call and after a reset", () => {
    const registry = new Registry();
    const { histogram, counter } = metrics(registry);
    const observe = vi.spyOn(histogram, "observe");
    const inc = vi.spyOn(counter, "inc");
    const h = new HistogramCell(histogram, { status: "ok", lane: "online" });
    const c = new CounterCell(counter, { outcome: "result", lane: "online" });
    for (let i = 0; i < 10; i++) {
      h.observe(i / 10);
      c.inc();
    }
    expect([observe.mock.calls.length, inc.mock.calls.length]).toEqual([1, 1]);
    registry.resetMetrics();
    for (let i = 0; i < 10; i++) {
      h.observe(i / 10);
      c.inc();
    }
    expect([observe.mock.calls.length, inc.mock.calls.length]).toEqual([2, 2]);
  });

  it("refuse what prom-client refuses", () => {
    const { histogram, counter } = metrics(new Registry());
    const h = new HistogramCell(histogram, { status: "ok", lane: "online" });
    const c = new CounterCell(counter, { outcome: "result", lane: "online" });
    h.observe(0.1);
    c.inc();
    expect(() => h.observe(Number.NaN)).toThrow(TypeError);
    expect(() => c.inc(Number.POSITIVE_INFINITY)).toThrow(TypeError);
    expect(() => c.inc(-1)).toThrow("not possible to decrease");
    expect(() => new HistogramCell(histogram, { nope: "x" }).observe(1)).toThrow();
  });
});
