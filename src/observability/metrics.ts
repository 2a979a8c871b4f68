import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { Lane } from "../contracts/lane.js";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { LagSample, SluiceEvents } from "../events/sluice-events.js";
import { SluiceError } from "../sluice-error.js";
import { GuardMetrics } from "./guard-metrics.js";
import { CounterCell, HistogramCell } from "./metric-cell.js";
import { ModelMetrics } from "./model-metrics.js";
import { registerSpanExportMetrics, type SpanExportCounts } from "./span-export-metrics.js";

export type { SpanExportCounts } from "./span-export-metrics.js";

export interface SluiceMetricsOptions {
  /** Registry to register into. Default: a new private registry (never prom-client's global one). */
  registry?: Registry;
  /** Register Node process metrics and event-loop delay (`collectDefaultMetrics`). Default `true`. */
  collectDefaultMetrics?: boolean;
  /** Event-loop delay sampling resolution, ms. Default 10. */
  eventLoopMonitoringPrecisionMs?: number;
  /** Labels added to every series, e.g. `{ instance_id }`. Default none. */
  defaultLabels?: Record<string, string>;
  /** Clock for freshness (epoch ms). Default `Date.now`. */
  nowMs?: () => number;
  /** Topics of the backfill lane (`topics.backfill`): their records get `lane="backfill"`. Default none. */
  backfillTopics?: readonly string[];
}

/** Every Sluice metric name, so dashboards and alert rules can be checked against the registry. */
export const SLUICE_METRIC_NAMES = [
  "sluice_consumer_lag_records",
  "sluice_consumer_lag_seconds",
  "sluice_freshness_seconds",
  "sluice_time_to_drain_seconds",
  "sluice_end_to_end_latency_seconds",
  "sluice_queue_wait_seconds",
  "sluice_inference_seconds",
  "sluice_batch_size",
  "sluice_batch_tokens",
  "sluice_batches_total",
  "sluice_records_total",
  "sluice_expired_total",
  "sluice_transactions_total",
  "sluice_transaction_duration_seconds",
  "sluice_kafka_request_duration_seconds",
  "sluice_model_info",
  "sluice_fallbacks_total",
  "sluice_model_cpu_seconds_total",
  "sluice_tokens_total",
] as const;

const LATENCY_BUCKETS_S = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const SHORT_BUCKETS_S = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const TOKEN_BUCKETS = [16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

/**
 * Owns the Prometheus registry of one Sluice process. Stages never call it: `attach(events)`
 * subscribes to the typed event bus (docs/design.md §6.9), and the lag gauges are fed by
 * `lag.sampled` events from `LagMonitor`. This file holds the pipeline's own series (lag,
 * freshness, latency, batches, records, transactions, model CPU and tokens); the model and shadow
 * family lives in model-metrics.ts, the SLO guard's in guard-metrics.ts and tracing's export
 * counts in span-export-metrics.ts.
 */
export class SluiceMetrics {
  readonly registry: Registry;
  private readonly nowMs: () => number;

  private readonly lagRecords: Gauge<"topic" | "partition">;
  private readonly lagSeconds: Gauge<"topic" | "partition">;
  private readonly timeToDrain: Gauge<"topic">;
  private readonly endToEnd: Histogram<"status" | "lane">;
  private readonly queueWait: Histogram<"lane">;
  private readonly intake: Histogram<"lane">;
  /** The SLO guard's family (guard-metrics.ts), registered at its first decision. */
  private readonly guard: GuardMetrics;
  /** The model family (model-metrics.ts): loaded models, the online version, switches, shadow. */
  private readonly models: ModelMetrics;
  private readonly inference: Histogram<"lane">;
  private readonly batchSize: Histogram<"lane">;
  private readonly batchTokens: Histogram<"lane">;
  private readonly batches: Counter<"reason" | "lane">;
  private readonly records: Counter<"outcome" | "lane">;
  private readonly fallbacks: Counter<"reason">;
  private readonly backfillTopics: ReadonlySet<string>;
  private readonly expired: Counter;
  private readonly transactions: Counter<"outcome">;
  private readonly transactionDuration: Histogram<"lane" | "outcome">;
  private readonly kafkaRequests: Histogram<"api">;
  private readonly modelCpu: Counter<"lane">;
  private readonly tokens: Counter<"lane">;

  /** Event time of the last committed record per partition (from commits here or from the log). */
  private readonly lastCommittedEventMs = new Map<string, { topic: string; partition: number; ms: number }>();
  /** Partitions seen in the previous lag sample, so vanished ones are removed instead of going stale. */
  private lagKeys = new Set<string>();
  private readonly detachers: Array<() => void> = [];
  /** Per-record series as cells (metric-cell.ts): by lane, then by outcome or status. */
  private readonly recordCells: Record<Lane, Map<string, CounterCell>> = {
    online: new Map(),
    backfill: new Map(),
  };
  private readonly endToEndCells: Record<Lane, Map<string, HistogramCell>> = {
    online: new Map(),
    backfill: new Map(),
  };
  /** Per-item series of micro-batches, by lane (cells made in the constructor). */
  private readonly queueWaitCells: Record<Lane, HistogramCell>;
  private readonly intakeCells: Record<Lane, HistogramCell>;

  constructor(opts: SluiceMetricsOptions = {}) {
    const precision = opts.eventLoopMonitoringPrecisionMs ?? 10;
    if (!Number.isInteger(precision) || precision < 1) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `eventLoopMonitoringPrecisionMs must be an integer ≥ 1, got ${precision}`,
      );
    }
    this.registry = opts.registry ?? new Registry();
    this.nowMs = opts.nowMs ?? Date.now;
    this.backfillTopics = new Set(opts.backfillTopics ?? []);
    if (opts.defaultLabels) this.registry.setDefaultLabels(opts.defaultLabels);
    const registers = [this.registry];

    this.lagRecords = new Gauge({
      name: "sluice_consumer_lag_records",
      help: "Data records after the consumer group's committed offset (transaction markers and aborted records excluded; sampled every lagIntervalMs).",
      labelNames: ["topic", "partition"],
      registers,
    });
    this.lagSeconds = new Gauge({
      name: "sluice_consumer_lag_seconds",
      help: "Age of the oldest uncommitted request record (first data record at the committed offset); 0 when caught up.",
      labelNames: ["topic", "partition"],
      registers,
    });
    const freshness = this.lastCommittedEventMs;
    const now = this.nowMs;
    new Gauge({
      name: "sluice_freshness_seconds",
      help: "Now minus the event timestamp of the last committed request record, seconds (grows while input is idle).",
      labelNames: ["topic", "partition"],
      registers,
      // Computed at scrape time so it keeps growing between commits instead of freezing.
      collect() {
        this.reset();
        const t = now();
        for (const e of freshness.values()) {
          this.set({ topic: e.topic, partition: String(e.partition) }, Math.max(0, (t - e.ms) / 1000));
        }
      },
    });
    this.timeToDrain = new Gauge({
      name: "sluice_time_to_drain_seconds",
      help: "Topic lag divided by recent group throughput (committed records/s), seconds; +Inf when lagging with no progress.",
      labelNames: ["topic"],
      registers,
    });
    this.endToEnd = new Histogram({
      name: "sluice_end_to_end_latency_seconds",
      help: "Commit time minus request record timestamp, by result status (or dead_letter / duplicate) and lane.",
      labelNames: ["status", "lane"],
      buckets: LATENCY_BUCKETS_S,
      registers,
    });
    this.queueWait = new Histogram({
      name: "sluice_queue_wait_seconds",
      help: "Per item: batch flush time minus enqueue time, seconds, by lane.",
      labelNames: ["lane"],
      buckets: SHORT_BUCKETS_S,
      registers,
    });
    this.intake = new Histogram({
      name: "sluice_intake_seconds",
      help: "Per item: enqueue time minus request record timestamp (fetch, decode, dedup), seconds, by lane.",
      labelNames: ["lane"],
      buckets: SHORT_BUCKETS_S,
      registers,
    });
    this.queueWaitCells = {
      online: new HistogramCell(this.queueWait, { lane: "online" }),
      backfill: new HistogramCell(this.queueWait, { lane: "backfill" }),
    };
    this.intakeCells = {
      online: new HistogramCell(this.intake, { lane: "online" }),
      backfill: new HistogramCell(this.intake, { lane: "backfill" }),
    };
    this.inference = new Histogram({
      name: "sluice_inference_seconds",
      help: "Wall time of one batch in the model runner (tokenize, pad, run, postprocess), seconds, by lane.",
      labelNames: ["lane"],
      buckets: SHORT_BUCKETS_S,
      registers,
    });
    this.batchSize = new Histogram({
      name: "sluice_batch_size",
      help: "Items per flushed micro-batch, by lane.",
      labelNames: ["lane"],
      buckets: SIZE_BUCKETS,
      registers,
    });
    this.batchTokens = new Histogram({
      name: "sluice_batch_tokens",
      help: "Tokens per flushed micro-batch (before padding), by lane.",
      labelNames: ["lane"],
      buckets: TOKEN_BUCKETS,
      registers,
    });
    this.batches = new Counter({
      name: "sluice_batches_total",
      help: "Flushed micro-batches by flush reason (fill: backfill filling an idle model) and lane.",
      labelNames: ["reason", "lane"],
      registers,
    });
    this.records = new Counter({
      name: "sluice_records_total",
      help: "Committed request records by outcome (result, dead_letter, duplicate) and lane.",
      labelNames: ["outcome", "lane"],
      registers,
    });
    this.fallbacks = new Counter({
      name: "sluice_fallbacks_total",
      help: "Online requests committed with status fallback, by reason (deadline, model_error, overload).",
      labelNames: ["reason"],
      registers,
    });
    this.expired = new Counter({
      name: "sluice_expired_total",
      help: "Requests committed with status expired (deadline passed before inference).",
      registers,
    });
    this.transactions = new Counter({
      name: "sluice_transactions_total",
      help: "Finished Kafka transactions by outcome (committed, aborted, fenced, failed).",
      labelNames: ["outcome"],
      registers,
    });
    this.transactionDuration = new Histogram({
      name: "sluice_transaction_duration_seconds",
      help: "Duration of finished Kafka transactions (first send to commit, or to the failure), by the lane of their input partition and outcome.",
      labelNames: ["lane", "outcome"],
      buckets: SHORT_BUCKETS_S,
      registers,
    });
    this.kafkaRequests = new Histogram({
      name: "sluice_kafka_request_duration_seconds",
      help: "Kafka requests of this process from creation to response (queued on the connection, then the round trip), by API (Produce, Fetch, AddPartitionsToTxn, EndTxn, …). A Fetch waits at the broker up to 100 ms (the consumer's maxWaitTimeInMs) when there is nothing new.",
      labelNames: ["api"],
      buckets: SHORT_BUCKETS_S,
      registers,
    });
    this.models = new ModelMetrics(registers);
    this.guard = new GuardMetrics(registers);

    this.modelCpu = new Counter({
      name: "sluice_model_cpu_seconds_total",
      help:
        "CPU-seconds of ORT calls on the inference worker threads (and their onnxruntime pool threads), by lane. " +
        "Measured per call from the kernel's per-thread counters (/proc/thread-self, Linux) or process.threadCpuUsage(); " +
        "elsewhere estimated as wall time × model.intraOpThreads. process_cpu_seconds_total minus this is the work outside the model.",
      labelNames: ["lane"],
      registers,
    });
    this.tokens = new Counter({
      name: "sluice_tokens_total",
      help: "Real tokens (before padding) the model ran, by lane; for CPU-seconds and cost per 1k tokens.",
      labelNames: ["lane"],
      registers,
    });

    // Create the known series at 0 so rate() and absent-vs-zero alerts work from the first scrape.
    for (const reason of ["size", "tokens", "wait", "deadline", "shutdown"])
      this.batches.inc({ reason, lane: "online" }, 0);
    for (const outcome of ["result", "dead_letter", "duplicate"])
      this.records.inc({ outcome, lane: "online" }, 0);
    for (const reason of ["deadline", "model_error", "overload"]) this.fallbacks.inc({ reason }, 0);
    for (const outcome of ["committed", "aborted", "fenced", "failed"]) this.transactions.inc({ outcome }, 0);
    this.expired.inc(0);
    this.modelCpu.inc({ lane: "online" }, 0);
    this.tokens.inc({ lane: "online" }, 0);

    if (opts.collectDefaultMetrics ?? true) {
      collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: precision });
    }
  }

  /** Subscribes to every event that feeds a metric. Returns a detach function (also `detach()`). */
  attach(events: SluiceEvents): () => void {
    const offs = [
      events.on("record.outcome", (e) => {
        // Per-record path: cells, so no label work per record (metric-cell.ts).
        const lane: Lane = this.backfillTopics.has(e.topic) ? "backfill" : "online";
        const records = this.recordCells[lane];
        let counted = records.get(e.outcome);
        if (counted === undefined) {
          counted = new CounterCell(this.records, { outcome: e.outcome, lane });
          records.set(e.outcome, counted);
        }
        counted.inc();
        if (e.status === "expired") this.expired.inc();
        if (e.fallbackReason !== undefined) this.fallbacks.inc({ reason: e.fallbackReason });
        const status = e.status ?? e.outcome;
        const latencies = this.endToEndCells[lane];
        let latency = latencies.get(status);
        if (latency === undefined) {
          latency = new HistogramCell(this.endToEnd, { status, lane });
          latencies.set(status, latency);
        }
        latency.observe(Math.max(0, e.endToEndMs) / 1000);
      }),
      events.on("microbatch.flushed", (e) => {
        const lane = { lane: e.lane ?? "online" };
        this.batches.inc({ reason: e.reason, ...lane });
        this.batchSize.observe(lane, e.size);
        this.batchTokens.observe(lane, e.tokens);
        const wait = this.queueWaitCells[lane.lane];
        for (const ms of e.queueWaitMs) wait.observe(Math.max(0, ms) / 1000);
        if (e.intakeMs !== undefined) {
          const intake = this.intakeCells[lane.lane];
          for (const ms of e.intakeMs) intake.observe(Math.max(0, ms) / 1000);
        }
      }),
      events.on("microbatch.inferred", (e) => {
        const lane = { lane: e.lane ?? "online" };
        this.inference.observe(lane, e.inferenceMs / 1000);
        if (e.cpuMs !== undefined && e.cpuMs > 0) this.modelCpu.inc(lane, e.cpuMs / 1000);
        if (e.realTokens > 0) this.tokens.inc(lane, e.realTokens);
      }),
      events.on("transaction.finished", (e) => {
        this.transactions.inc({ outcome: e.outcome });
        const lane = this.backfillTopics.has(e.topic) ? "backfill" : "online";
        this.transactionDuration.observe({ lane, outcome: e.outcome }, Math.max(0, e.durationMs) / 1000);
        if (e.outcome === "committed" && e.lastEventTimestampMs !== undefined) {
          this.noteCommittedEventTime(e.topic, e.partition, e.lastEventTimestampMs);
        }
      }),
      events.on("kafka.request", (e) =>
        this.kafkaRequests.observe({ api: e.api }, Math.max(0, e.durationMs) / 1000),
      ),
      events.on("partitions.revoked", (e) => {
        // Another instance owns these now and reports their freshness.
        for (const p of e.partitions) this.lastCommittedEventMs.delete(topicPartitionKey(e.topic, p));
      }),
      events.on("lag.sampled", (e) => this.recordLagSample(e)),
      ...this.guard.listen(events),
      ...this.models.listen(events),
    ];
    const detach = () => {
      for (const off of offs) off();
    };
    this.detachers.push(detach);
    return detach;
  }

  detach(): void {
    for (const d of this.detachers.splice(0)) d();
  }

  /**
   * Exports the span export queue's counts, read from `counts` at each scrape
   * (span-export-metrics.ts says which series). Call once, when tracing is on.
   */
  observeSpanExports(counts: () => SpanExportCounts): void {
    registerSpanExportMetrics(this.registry, counts);
  }

  /** Prometheus text exposition of the registry (what `/metrics` serves). */
  scrape(): Promise<string> {
    return this.registry.metrics();
  }

  private noteCommittedEventTime(topic: string, partition: number, ms: number): void {
    const k = topicPartitionKey(topic, partition);
    const prev = this.lastCommittedEventMs.get(k);
    // Record timestamps are producer clocks and need not be monotonic; freshness follows the newest.
    if (!prev || ms > prev.ms) this.lastCommittedEventMs.set(k, { topic, partition, ms });
  }

  private recordLagSample(sample: LagSample): void {
    const seen = new Set<string>();
    for (const p of sample.partitions) {
      const labels = { topic: p.topic, partition: String(p.partition) };
      seen.add(topicPartitionKey(p.topic, p.partition));
      this.lagRecords.set(labels, p.lagRecords);
      this.lagSeconds.set(labels, p.lagSeconds);
      if (p.lastCommittedEventTimestampMs !== undefined) {
        this.noteCommittedEventTime(p.topic, p.partition, p.lastCommittedEventTimestampMs);
      }
    }
    for (const k of this.lagKeys) {
      if (seen.has(k)) continue;
      const [topic, partition] = k.split("\u0000") as [string, string];
      this.lagRecords.remove({ topic, partition });
      this.lagSeconds.remove({ topic, partition });
    }
    this.lagKeys = seen;
    this.timeToDrain.reset();
    for (const t of sample.topics) this.timeToDrain.set({ topic: t.topic }, t.timeToDrainSeconds);
  }
}
