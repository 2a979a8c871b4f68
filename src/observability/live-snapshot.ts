import type { MetricValue, Registry } from "prom-client";
import type { RunBoardView } from "./backfill-run-board.js";

/** One owned input partition and its task state (StreamProcessor.assignment()). */
export interface AssignedPartition {
  topic: string;
  partition: number;
  lane: "online" | "backfill";
  /** `ready`, or the task state while not running (`restoring`, …). */
  phase: string;
}

/** Per topic: what the lag monitor last sampled. */
export interface TopicGauges {
  /** Records waiting on the broker (consumer lag in records, summed over the topic's partitions). */
  lagRecords: number;
  /** Oldest uncommitted record's age, the largest over the topic's partitions, s. */
  lagSeconds: number | null;
  /** Lag ÷ group throughput, s; null when infinite (lagging with no progress) or not sampled. */
  timeToDrainSeconds: number | null;
}

/**
 * `/ui/snapshot.json`: the current values the live page charts, read from the metrics registry on
 * request. Counters are cumulative (the page turns two polls into a rate) and the latency histogram
 * is cumulative buckets (the page takes quantiles of the difference). No payload text: labels only.
 */
export interface LiveSnapshotJson {
  /** Epoch ms of this snapshot. */
  at: number;
  instanceId: string;
  /** Committed records with a result, by lane (`sluice_records_total{outcome="result"}`). */
  results: Record<string, number>;
  /** Committed dead letters, by lane (`sluice_records_total{outcome="dead_letter"}`). */
  deadLetters: Record<string, number>;
  /** Online fallback answers, all reasons (`sluice_fallbacks_total`). */
  fallbacks: number;
  /**
   * Model seconds by lane: CPU seconds (`cpu`, `sluice_model_cpu_seconds_total`) when this build has
   * that counter, else model busy time (`busy`, `sluice_inference_seconds_sum`).
   */
  modelSeconds: Record<string, number>;
  modelSecondsSource: "cpu" | "busy";
  /** Online end-to-end latency, cumulative buckets `[upper bound s, count]` (duplicates excluded). */
  onlineLatencyBuckets: [number, number][];
  /**
   * The SLO guard's online latency target and estimate, s, its backfill allowance (0..1), and the share
   * of the backfill's CPU budget the headroom leaves it (0..1); null when absent.
   */
  onlineTargetSeconds: number | null;
  onlineEstimateSeconds: number | null;
  backfillAllowance: number | null;
  backfillCpuHeadroom: number | null;
  topics: Record<string, TopicGauges>;
  /** Freshness by `topic/partition`, s. */
  freshness: Record<string, number>;
  assignment: AssignedPartition[];
  runs: RunBoardView | null;
  /** The version online answers with, the candidate's, and the shadow comparison (docs/model-upgrades.md). */
  models: ModelsView;
}

export interface ModelsView {
  online: string | null;
  candidate: string | null;
  shadow: {
    /** By outcome: scored, shed, revoked. */
    requests: Record<string, number>;
    /** Mean wall time and model CPU per item, ms, by model (online, candidate); null before any. */
    latencyMsPerItem: Record<string, number | null>;
    cpuMsPerItem: Record<string, number | null>;
    /** Mean agreement by measure (label, cosine, max_abs_diff) and how many requests it averages. */
    agreement: Record<string, { mean: number; count: number }>;
  };
}

export interface LiveSnapshotOptions {
  registry: Registry;
  instanceId: string;
  /** This instance's partitions and their state. */
  assignment: () => AssignedPartition[];
  /** The backfill runs table; absent: no runs shown (null). */
  runs?: () => Promise<RunBoardView>;
  nowMs?: () => number;
}

type Value = MetricValue<string> & { metricName?: string };
type Values = Value[];

/**
 * Builds `LiveSnapshotJson` from the same prom-client registry `/metrics` serves, reading only the
 * few metrics the page shows, and only when asked: nothing runs while nobody looks at the page.
 */
export class LiveSnapshot {
  private readonly nowMs: () => number;

  constructor(private readonly opts: LiveSnapshotOptions) {
    this.nowMs = opts.nowMs ?? Date.now;
  }

  async build(): Promise<LiveSnapshotJson> {
    const read = (name: string) => this.values(name);
    const [
      records,
      fallbacks,
      cpu,
      inference,
      e2e,
      target,
      estimate,
      allowance,
      headroom,
      lagR,
      lagS,
      drain,
      fresh,
    ] = await Promise.all([
      read("sluice_records_total"),
      read("sluice_fallbacks_total"),
      read("sluice_model_cpu_seconds_total"),
      read("sluice_inference_seconds"),
      read("sluice_end_to_end_latency_seconds"),
      read("sluice_online_latency_target_seconds"),
      read("sluice_online_latency_estimate_seconds"),
      read("sluice_backfill_guard_allowance_ratio"),
      read("sluice_backfill_cpu_headroom_ratio"),
      read("sluice_consumer_lag_records"),
      read("sluice_consumer_lag_seconds"),
      read("sluice_time_to_drain_seconds"),
      read("sluice_freshness_seconds"),
    ]);
    const models = await this.models();
    const hasCpu = cpu !== null;
    const topics: Record<string, TopicGauges> = {};
    const topic = (t: string): TopicGauges => {
      topics[t] ??= { lagRecords: 0, lagSeconds: null, timeToDrainSeconds: null };
      return topics[t];
    };
    for (const v of lagR ?? []) topic(label(v, "topic")).lagRecords += v.value;
    for (const v of lagS ?? []) {
      const t = topic(label(v, "topic"));
      if (Number.isFinite(v.value)) t.lagSeconds = Math.max(t.lagSeconds ?? 0, v.value);
    }
    for (const v of drain ?? []) {
      topic(label(v, "topic")).timeToDrainSeconds = Number.isFinite(v.value) ? v.value : null;
    }
    const freshness: Record<string, number> = {};
    for (const v of fresh ?? []) freshness[`${label(v, "topic")}/${label(v, "partition")}`] = v.value;
    return {
      at: this.nowMs(),
      instanceId: this.opts.instanceId,
      results: sumBy(records, "lane", (v) => label(v, "outcome") === "result"),
      deadLetters: sumBy(records, "lane", (v) => label(v, "outcome") === "dead_letter"),
      fallbacks: sumBy(fallbacks, "", () => true)[""] ?? 0,
      modelSeconds: hasCpu
        ? sumBy(cpu, "lane", () => true)
        : sumBy(inference, "lane", (v) => v.metricName === "sluice_inference_seconds_sum"),
      modelSecondsSource: hasCpu ? "cpu" : "busy",
      onlineLatencyBuckets: latencyBuckets(e2e),
      onlineTargetSeconds: first(target),
      onlineEstimateSeconds: first(estimate),
      backfillAllowance: first(allowance),
      backfillCpuHeadroom: first(headroom),
      topics,
      freshness,
      assignment: this.opts.assignment(),
      runs: this.opts.runs ? await this.opts.runs() : null,
      models,
    };
  }

  private async models(): Promise<ModelsView> {
    const [online, requests, latency, cpu, agreement] = await Promise.all([
      this.values("sluice_model_online_info"),
      this.values("sluice_shadow_requests_total"),
      this.values("sluice_shadow_latency_ms_per_item"),
      this.values("sluice_shadow_cpu_ms_per_item"),
      this.values("sluice_shadow_agreement"),
    ]);
    const role = (r: string) => (online ?? []).find((v) => label(v, "role") === r);
    const means = (values: Values | null, by: string) => {
      const sums = sumBy(values, by, (v) => v.metricName?.endsWith("_sum") === true);
      const counts = sumBy(values, by, (v) => v.metricName?.endsWith("_count") === true);
      return Object.fromEntries(
        Object.entries(counts).map(([k, n]) => [k, { mean: n > 0 ? (sums[k] ?? 0) / n : 0, count: n }]),
      );
    };
    const meanOnly = (values: Values | null) =>
      Object.fromEntries(
        Object.entries(means(values, "model")).map(([k, m]) => [k, m.count > 0 ? m.mean : null]),
      );
    const r = (v: Value | undefined) => (v ? label(v, "version") : null);
    return {
      online: r(role("online")),
      candidate: r(role("candidate")),
      shadow: {
        requests: sumBy(requests, "outcome", () => true),
        latencyMsPerItem: meanOnly(latency),
        cpuMsPerItem: meanOnly(cpu),
        agreement: means(agreement, "measure"),
      },
    };
  }

  /** A metric's values, or null when this build (or this registry) has no such metric. */
  private async values(name: string): Promise<Values | null> {
    const metric = this.opts.registry.getSingleMetric(name);
    if (!metric) return null;
    return (await metric.get()).values as Values;
  }
}

function label(v: Value, name: string): string {
  return String((v.labels as Record<string, string | number | undefined>)[name] ?? "");
}

/** Sums the values that pass `keep`, grouped by one label ("" = all in one group). */
function sumBy(values: Values | null, by: string, keep: (v: Value) => boolean): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values ?? []) {
    if (!keep(v)) continue;
    const k = by ? label(v, by) : "";
    out[k] = (out[k] ?? 0) + v.value;
  }
  return out;
}

function first(values: Values | null): number | null {
  const v = values?.find((x) => Number.isFinite(x.value));
  return v === undefined ? null : v.value;
}

/** Online end-to-end latency buckets, summed over statuses (duplicates are not answers). */
function latencyBuckets(values: Values | null): [number, number][] {
  const byLe = new Map<number, number>();
  for (const v of values ?? []) {
    if (v.metricName !== "sluice_end_to_end_latency_seconds_bucket") continue;
    if (label(v, "lane") !== "online" || label(v, "status") === "duplicate") continue;
    const raw = label(v, "le");
    const le = raw === "+Inf" ? Number.POSITIVE_INFINITY : Number(raw);
    byLe.set(le, (byLe.get(le) ?? 0) + v.value);
  }
  // JSON has no Infinity: the last bucket's bound is sent as -1.
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, n]) => [Number.isFinite(le) ? le : -1, n]);
}
