import { afterEach, describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { SLUICE_METRIC_NAMES, SluiceMetrics } from "../../../src/observability/metrics.js";
import { ObservabilityServer } from "../../../src/observability/observability-server.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Minimal Prometheus text-format parser (no escapes in our label values). */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split("\n")) {
    if (line.startsWith("# TYPE ")) {
      const [, , name, type] = line.split(" ");
      types.set(name!, type!);
      continue;
    }
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsable line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (m[2] ?? "").split(",").filter(Boolean)) {
      const [k, v] = pair.split("=") as [string, string];
      labels[k] = v.slice(1, -1);
    }
    const raw = m[3]!;
    const value =
      raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : /^nan$/i.test(raw) ? Number.NaN : Number(raw);
    samples.push({ name: m[1]!, labels, value });
  }
  return { samples, types };
}

const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

const servers: ObservabilityServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

describe("SluiceMetrics fed by events, scraped over HTTP", () => {
  it("exposes every metric with the exact names, types and labels", async () => {
    let now = 1_000_000;
    const metrics = new SluiceMetrics({ nowMs: () => now });
    const events = new SluiceEvents();
    metrics.attach(events);
    const server = new ObservabilityServer({ registry: metrics.registry });
    servers.push(server);
    const { port } = await server.start({ host: "127.0.0.1", port: 0 });

    events.emit("model.loaded", { name: "bge-small-en-v1.5-q", version: "abc123def456", task: "embedding" });
    events.emit("microbatch.flushed", { reason: "size", size: 4, tokens: 100, queueWaitMs: [1, 2, 3, 40] });
    events.emit("microbatch.flushed", { reason: "wait", size: 1, tokens: 7, queueWaitMs: [12] });
    events.emit("microbatch.inferred", {
      size: 4,
      inferenceMs: 25,
      realTokens: 100,
      paddedTokens: 128,
      cpuMs: 40,
      expired: 0,
      failed: 0,
    });
    // Model CPU and tokens by lane: a backfill batch counts apart from the online one.
    events.emit("microbatch.inferred", {
      lane: "backfill",
      size: 2,
      inferenceMs: 10,
      realTokens: 30,
      paddedTokens: 32,
      cpuMs: 15,
      expired: 0,
      failed: 0,
    });
    for (const outcome of ["result", "result", "dead_letter", "duplicate"] as const) {
      events.emit("record.outcome", {
        topic: "req",
        partition: 0,
        outcome,
        ...(outcome === "result" ? { status: "ok" as const } : {}),
        endToEndMs: 80,
      });
    }
    events.emit("record.outcome", {
      topic: "req",
      partition: 0,
      outcome: "result",
      status: "expired",
      endToEndMs: 900,
    });
    events.emit("transaction.finished", {
      topic: "req",
      partition: 0,
      outcome: "committed",
      records: 5,
      durationMs: 9,
      nextOffset: "42",
      lastEventTimestampMs: now - 30_000,
    });
    events.emit("transaction.finished", {
      topic: "req",
      partition: 1,
      outcome: "aborted",
      records: 2,
      durationMs: 3,
    });
    events.emit("lag.sampled", {
      groupId: "g",
      sampledAtMs: now,
      partitions: [
        {
          topic: "req",
          partition: 0,
          committedOffset: "42",
          endOffset: "50",
          lagRecords: 8,
          lagSeconds: 2.5,
        },
        { topic: "req", partition: 1, committedOffset: null, endOffset: "0", lagRecords: 0, lagSeconds: 0 },
      ],
      topics: [{ topic: "req", lagRecords: 8, throughputRecordsPerSecond: 4, timeToDrainSeconds: 2 }],
    });

    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    const { samples, types } = parse(await res.text());

    const expectedTypes: Record<string, string> = {
      sluice_consumer_lag_records: "gauge",
      sluice_consumer_lag_seconds: "gauge",
      sluice_freshness_seconds: "gauge",
      sluice_time_to_drain_seconds: "gauge",
      sluice_end_to_end_latency_seconds: "histogram",
      sluice_queue_wait_seconds: "histogram",
      sluice_inference_seconds: "histogram",
      sluice_batch_size: "histogram",
      sluice_batch_tokens: "histogram",
      sluice_batches_total: "counter",
      sluice_records_total: "counter",
      sluice_expired_total: "counter",
      sluice_transactions_total: "counter",
      sluice_transaction_duration_seconds: "histogram",
      sluice_kafka_request_duration_seconds: "histogram",
      sluice_model_info: "gauge",
      sluice_fallbacks_total: "counter",
      sluice_model_cpu_seconds_total: "counter",
      sluice_tokens_total: "counter",
    };
    expect(Object.keys(expectedTypes).sort()).toEqual([...SLUICE_METRIC_NAMES].sort());
    for (const [name, type] of Object.entries(expectedTypes)) expect(types.get(name), name).toBe(type);

    // Label sets, exactly.
    const labelKeys = (name: string) =>
      new Set(find(samples, name).map((s) => Object.keys(s.labels).sort().join(",")));
    expect(labelKeys("sluice_consumer_lag_records")).toEqual(new Set(["partition,topic"]));
    expect(labelKeys("sluice_consumer_lag_seconds")).toEqual(new Set(["partition,topic"]));
    expect(labelKeys("sluice_freshness_seconds")).toEqual(new Set(["partition,topic"]));
    expect(labelKeys("sluice_time_to_drain_seconds")).toEqual(new Set(["topic"]));
    expect(labelKeys("sluice_batches_total")).toEqual(new Set(["lane,reason"]));
    expect(labelKeys("sluice_records_total")).toEqual(new Set(["lane,outcome"]));
    expect(labelKeys("sluice_fallbacks_total")).toEqual(new Set(["reason"]));
    expect(labelKeys("sluice_transactions_total")).toEqual(new Set(["outcome"]));
    expect(labelKeys("sluice_transaction_duration_seconds_count")).toEqual(new Set(["lane,outcome"]));
    expect(labelKeys("sluice_expired_total")).toEqual(new Set([""]));
    expect(labelKeys("sluice_model_info")).toEqual(new Set(["name,role,task,version"]));
    expect(labelKeys("sluice_end_to_end_latency_seconds_count")).toEqual(new Set(["lane,status"]));
    expect(labelKeys("sluice_queue_wait_seconds_count")).toEqual(new Set(["lane"]));
    expect(labelKeys("sluice_model_cpu_seconds_total")).toEqual(new Set(["lane"]));
    expect(labelKeys("sluice_tokens_total")).toEqual(new Set(["lane"]));

    // Values follow the events.
    const one = (name: string, labels: Record<string, string> = {}) => {
      const hit = find(samples, name, labels);
      expect(hit, `${name} ${JSON.stringify(labels)}`).toHaveLength(1);
      return hit[0]!.value;
    };
    expect(one("sluice_consumer_lag_records", { topic: "req", partition: "0" })).toBe(8);
    expect(one("sluice_consumer_lag_seconds", { topic: "req", partition: "0" })).toBe(2.5);
    expect(one("sluice_consumer_lag_records", { topic: "req", partition: "1" })).toBe(0);
    expect(one("sluice_freshness_seconds", { topic: "req", partition: "0" })).toBe(30);
    expect(one("sluice_time_to_drain_seconds", { topic: "req" })).toBe(2);
    expect(one("sluice_batches_total", { reason: "size" })).toBe(1);
    expect(one("sluice_batches_total", { reason: "wait" })).toBe(1);
    expect(one("sluice_batches_total", { reason: "deadline" })).toBe(0);
    expect(one("sluice_batch_size_sum")).toBe(5);
    expect(one("sluice_batch_tokens_sum")).toBe(107);
    expect(one("sluice_queue_wait_seconds_count")).toBe(5);
    expect(one("sluice_queue_wait_seconds_sum")).toBeCloseTo(0.058, 6);
    expect(one("sluice_inference_seconds_sum", { lane: "online" })).toBeCloseTo(0.025, 6);
    expect(one("sluice_model_cpu_seconds_total", { lane: "online" })).toBeCloseTo(0.04, 9);
    expect(one("sluice_model_cpu_seconds_total", { lane: "backfill" })).toBeCloseTo(0.015, 9);
    expect(one("sluice_tokens_total", { lane: "online" })).toBe(100);
    expect(one("sluice_tokens_total", { lane: "backfill" })).toBe(30);
    expect(one("sluice_records_total", { outcome: "result" })).toBe(3);
    expect(one("sluice_records_total", { outcome: "dead_letter" })).toBe(1);
    expect(one("sluice_records_total", { outcome: "duplicate" })).toBe(1);
    expect(one("sluice_expired_total")).toBe(1);
    expect(one("sluice_end_to_end_latency_seconds_count", { status: "ok" })).toBe(2);
    expect(one("sluice_end_to_end_latency_seconds_count", { status: "expired" })).toBe(1);
    expect(one("sluice_end_to_end_latency_seconds_count", { status: "dead_letter" })).toBe(1);
    expect(one("sluice_end_to_end_latency_seconds_bucket", { status: "ok", le: "0.1" })).toBe(2);
    expect(one("sluice_transactions_total", { outcome: "committed" })).toBe(1);
    expect(one("sluice_transactions_total", { outcome: "aborted" })).toBe(1);
    expect(one("sluice_transaction_duration_seconds_count", { lane: "online", outcome: "committed" })).toBe(
      1,
    );
    expect(
      one("sluice_transaction_duration_seconds_sum", { lane: "online", outcome: "committed" }),
    ).toBeCloseTo(0.009, 9);
    expect(
      one("sluice_transaction_duration_seconds_bucket", { lane: "online", outcome: "committed", le: "0.01" }),
    ).toBe(1);
    expect(
      one("sluice_transaction_duration_seconds_bucket", {
        lane: "online",
        outcome: "committed",
        le: "0.005",
      }),
    ).toBe(0);
    expect(one("sluice_transaction_duration_seconds_count", { lane: "online", outcome: "aborted" })).toBe(1);
    expect(
      one("sluice_model_info", {
        name: "bge-small-en-v1.5-q",
        version: "abc123def456",
        task: "embedding",
        role: "serving",
      }),
    ).toBe(1);

    // Default process metrics and event-loop delay are there too.
    expect(types.has("process_cpu_seconds_total")).toBe(true);
    expect(types.has("nodejs_eventloop_lag_p99_seconds")).toBe(true);

    // Freshness keeps growing between commits (computed at scrape time); revoked partitions disappear.
    now += 10_000;
    expect(find(parse(await metrics.scrape()).samples, "sluice_freshness_seconds")[0]!.value).toBe(40);
    events.emit("partitions.revoked", { topic: "req", partitions: [0] });
    expect(find(parse(await metrics.scrape()).samples, "sluice_freshness_seconds")).toHaveLength(0);

    // A partition missing from the next lag sample is removed, not left stale.
    events.emit("lag.sampled", {
      groupId: "g",
      sampledAtMs: now,
      partitions: [
        { topic: "req", partition: 1, committedOffset: "0", endOffset: "3", lagRecords: 3, lagSeconds: 1 },
      ],
      topics: [{ topic: "req", lagRecords: 3, throughputRecordsPerSecond: 0, timeToDrainSeconds: Infinity }],
    });
    const after = parse(await metrics.scrape()).samples;
    expect(find(after, "sluice_consumer_lag_records").map((s) => s.labels.partition)).toEqual(["1"]);
    expect(find(after, "sluice_time_to_drain_seconds")[0]!.value).toBe(Infinity);
    metrics.detach();
  });

  it("stops counting after detach", async () => {
    const metrics = new SluiceMetrics({ collectDefaultMetrics: false });
    const events = new SluiceEvents();
    metrics.attach(events);
    events.emit("microbatch.flushed", { reason: "size", size: 2, tokens: 4, queueWaitMs: [1, 1] });
    metrics.detach();
    events.emit("microbatch.flushed", { reason: "size", size: 2, tokens: 4, queueWaitMs: [1, 1] });
    expect(await metrics.scrape()).toContain('sluice_batches_total{reason="size",lane="online"} 1');
  });
});

describe("SluiceMetrics lanes and fallbacks", () => {
  it("labels batches and records by lane and counts committed fallbacks by reason", async () => {
    const metrics = new SluiceMetrics({ collectDefaultMetrics: false, backfillTopics: ["bf"] });
    const events = new SluiceEvents();
    metrics.attach(events);
    events.emit("microbatch.flushed", {
      reason: "fill",
      lane: "backfill",
      size: 3,
      tokens: 9,
      queueWaitMs: [1, 1, 1],
    });
    events.emit("microbatch.inferred", {
      lane: "backfill",
      size: 3,
      inferenceMs: 30,
      realTokens: 9,
      paddedTokens: 9,
      expired: 0,
      failed: 0,
    });
    events.emit("record.outcome", {
      topic: "bf",
      partition: 0,
      outcome: "result",
      status: "ok",
      endToEndMs: 5,
    });
    for (const reason of ["overload", "overload", "deadline"] as const)
      events.emit("record.outcome", {
        topic: "req",
        partition: 0,
        outcome: "result",
        status: "fallback",
        fallbackReason: reason,
        endToEndMs: 5,
      });
    const { samples } = parse(await metrics.scrape());
    const value = (name: string, labels: Record<string, string>) => find(samples, name, labels)[0]?.value;
    expect(value("sluice_batches_total", { reason: "fill", lane: "backfill" })).toBe(1);
    expect(value("sluice_batch_size_sum", { lane: "backfill" })).toBe(3);
    expect(value("sluice_inference_seconds_count", { lane: "backfill" })).toBe(1);
    expect(value("sluice_records_total", { outcome: "result", lane: "backfill" })).toBe(1);
    expect(value("sluice_records_total", { outcome: "result", lane: "online" })).toBe(3);
    expect(value("sluice_end_to_end_latency_seconds_count", { status: "fallback", lane: "online" })).toBe(3);
    expect(value("sluice_fallbacks_total", { reason: "overload" })).toBe(2);
    expect(value("sluice_fallbacks_total", { reason: "deadline" })).toBe(1);
    expect(value("sluice_fallbacks_total", { reason: "model_error" })).toBe(0);
  });
});

describe("span export metrics (tracing on)", () => {
  it("reads the export queue's counts at each scrape; none are registered without tracing", async () => {
    const metrics = new SluiceMetrics({ collectDefaultMetrics: false });
    expect(find(parse(await metrics.scrape()).samples, "sluice_tracing_spans_total")).toEqual([]);
    const counts = { queued: 3, exported: 10, dropped: 2, failedExports: 1, failedSpans: 4 };
    metrics.observeSpanExports(() => counts);
    let { samples, types } = parse(await metrics.scrape());
    expect(types.get("sluice_tracing_spans_total")).toBe("counter");
    const spans = (outcome: string) => find(samples, "sluice_tracing_spans_total", { outcome })[0]?.value;
    expect([spans("exported"), spans("dropped"), spans("failed")]).toEqual([10, 2, 4]);
    expect(find(samples, "sluice_tracing_export_failures_total")[0]?.value).toBe(1);
    expect(find(samples, "sluice_tracing_queued_spans")[0]?.value).toBe(3);
    Object.assign(counts, { queued: 0, exported: 25, dropped: 7 });
    ({ samples, types } = parse(await metrics.scrape()));
    expect([spans("exported"), spans("dropped")]).toEqual([25, 7]);
    expect(find(samples, "sluice_tracing_queued_spans")[0]?.value).toBe(0);
  });
});
