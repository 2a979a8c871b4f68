import type { Admin, Kafka } from "kafkajs";
import type { Logger } from "pino";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { LagSample, PartitionLag, SluiceEvents, TopicLag } from "../events/sluice-events.js";
import { kafkaFailure } from "../kafka/kafka-failure.js";
import { isAccessFailure, SluiceError } from "../sluice-error.js";
import type { InFlightRecords } from "./in-flight-records.js";
import { PeriodicTask } from "./periodic-task.js";
import { type ProbedRecord, RecordTimestampReader, type TimestampProbe } from "./record-timestamp-reader.js";

export interface LagMonitorOptions {
  kafka: Kafka;
  /** Consumer group whose committed offsets are measured. */
  groupId: string;
  /** Topics the group consumes. */
  topics: readonly string[];
  /** Where `lag.sampled` is emitted (metrics and heartbeats listen). Optional for one-shot use. */
  events?: SluiceEvents;
  /** Sampling period for `start()`, ms (config `observability.lagIntervalMs`). Default 5000. */
  intervalMs?: number;
  /** Read the timestamp of the first uncommitted record to compute lag seconds. Default `true`. */
  readLagSeconds?: boolean;
  /**
   * Also read the timestamp of the last committed record from the log (freshness without a running
   * instance, e.g. `sluice status`). A running processor learns it from its own commits instead.
   * Default `false`.
   */
  readCommittedTimestamps?: boolean;
  /** Records before the committed offset scanned for the last committed data record. Default 16. */
  lookBehindRecords?: number;
  /**
   * Uncommitted ranges up to this many offsets are read whole and their data records counted
   * exactly; longer ones count from the first data record to the log end (markers inside a backlog
   * then count too, at most one per transaction). Default 1000.
   */
  exactCountOffsets?: number;
  /**
   * In-flight tracker of a running processor: lag seconds of partitions it owns come from the records
   * it has consumed (no broker read). Others fall back to reading the log. Default none.
   */
  inFlight?: InFlightRecords;
  /** Report only partitions `inFlight` says this instance owns (requires `inFlight`). Default `false`. */
  ownedPartitionsOnly?: boolean;
  /** Timeout of one timestamp read, ms. Default: min(5000, intervalMs). */
  probeTimeoutMs?: number;
  /** Weight of the newest throughput measurement in the moving average, 0 < α ≤ 1. Default 0.5. */
  throughputSmoothing?: number;
  nowMs?: () => number;
  logger?: Logger;
}

interface CachedProbe {
  committed: bigint;
  end: bigint;
  atOrAfter: ProbedRecord | null | undefined;
  before: ProbedRecord | null | undefined;
  /** Data records in [committed, end) when the whole range was read. */
  dataRecords: number | undefined;
}

/**
 * Samples consumer-group lag from the broker: `fetchTopicOffsets` (log-end offsets) and
 * `fetchOffsets` (the group's commits) every `intervalMs`, then, for lagging partitions, the
 * timestamp of the record at the committed offset via `RecordTimestampReader`.
 *
 * Lag records counts data records only: transaction markers and aborted records are not work, so a
 * topic written by a transactional producer reads 0 at rest (the committed offset of a caught-up
 * group stops before the last commit marker, so `end − committed` would stay ≥ 1 forever). With no
 * data record after the committed offset the lag is 0; a short uncommitted range is counted exactly,
 * a long one from its first data record to the log end (see `exactCountOffsets`). This is the one
 * home of that computation: the metrics, heartbeats and `sluice status` all read these samples.
 *
 * Lag seconds = now − timestamp of the first data record at or after the committed offset, i.e.
 * the record the group is stuck on. When the partition is caught up or idle there is no such
 * record and lag seconds is 0, which is right: nothing is waiting. Timestamps are read from the log
 * (not tracked in flight) so the number is the same from any process, including `sluice status`
 * with no instance running, and for partitions other instances own. Reads are cached by committed
 * offset, so a stuck partition costs no further reads.
 */
export class LagMonitor {
  private readonly opts: Required<Omit<LagMonitorOptions, "events" | "logger" | "inFlight">> &
    Pick<LagMonitorOptions, "events" | "logger" | "inFlight">;
  private readonly reader: RecordTimestampReader;
  private admin: Admin | undefined;
  private connecting: Promise<Admin> | undefined;
  private readonly schedule: PeriodicTask;
  private sampling: Promise<LagSample | undefined> | undefined;
  private last: LagSample | undefined;
  private readonly cache = new Map<string, CachedProbe>();
  /** Group position per partition at the previous sample (throughput = its advance). */
  private prevCommitted: { atMs: number; byPartition: Map<string, bigint> } | undefined;
  private readonly throughput = new Map<string, number>();
  /** Set when an ACL refused the timestamp probe: no more probes (see sample()). */
  private probeRefused: SluiceError | undefined;

  constructor(opts: LagMonitorOptions) {
    const intervalMs = opts.intervalMs ?? 5000;
    const lookBehindRecords = opts.lookBehindRecords ?? 16;
    const exactCountOffsets = opts.exactCountOffsets ?? 1000;
    const throughputSmoothing = opts.throughputSmoothing ?? 0.5;
    if (!opts.groupId) throw new SluiceError("CONFIG_INVALID", "LagMonitor needs a consumer groupId");
    if (opts.topics.length === 0)
      throw new SluiceError("CONFIG_INVALID", "LagMonitor needs at least one topic");
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new SluiceError("CONFIG_INVALID", `observability.lagIntervalMs must be > 0, got ${intervalMs}`);
    }
    if (!Number.isInteger(lookBehindRecords) || lookBehindRecords < 1) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `lookBehindRecords must be an integer ≥ 1, got ${lookBehindRecords}`,
      );
    }
    if (!Number.isInteger(exactCountOffsets) || exactCountOffsets < 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `exactCountOffsets must be an integer ≥ 0, got ${exactCountOffsets}`,
      );
    }
    if (!(throughputSmoothing > 0 && throughputSmoothing <= 1)) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `throughputSmoothing must be in (0, 1], got ${throughputSmoothing}`,
      );
    }
    if (opts.ownedPartitionsOnly && !opts.inFlight) {
      throw new SluiceError(
        "CONFIG_INVALID",
        "LagMonitor ownedPartitionsOnly needs an inFlight tracker to know ownership",
      );
    }
    this.opts = {
      kafka: opts.kafka,
      inFlight: opts.inFlight,
      ownedPartitionsOnly: opts.ownedPartitionsOnly ?? false,
      groupId: opts.groupId,
      topics: [...new Set(opts.topics)],
      events: opts.events,
      logger: opts.logger,
      intervalMs,
      readLagSeconds: opts.readLagSeconds ?? true,
      readCommittedTimestamps: opts.readCommittedTimestamps ?? false,
      lookBehindRecords,
      exactCountOffsets,
      probeTimeoutMs: opts.probeTimeoutMs ?? Math.min(5000, intervalMs),
      throughputSmoothing,
      nowMs: opts.nowMs ?? Date.now,
    };
    this.reader = new RecordTimestampReader({ kafka: opts.kafka, timeoutMs: this.opts.probeTimeoutMs });
    this.schedule = new PeriodicTask(
      () => this.sample(),
      intervalMs,
      (err) =>
        this.opts.logger?.warn(
          { err, groupId: this.opts.groupId },
          "lag sample failed; will retry next interval",
        ),
    );
  }

  /** The most recent sample, if any. */
  latest(): LagSample | undefined {
    return this.last;
  }

  /** Samples now, then every `intervalMs` (no overlap: the next sample is scheduled after one ends). */
  start(): void {
    this.schedule.start();
  }

  /** Stops sampling and disconnects; waits for a sample in progress. Safe to call twice. */
  async stop(): Promise<void> {
    this.schedule.stop();
    await this.sampling?.catch(() => undefined);
    const admin = this.admin ?? (await this.connecting?.catch(() => undefined));
    this.admin = undefined;
    this.connecting = undefined;
    await admin?.disconnect().catch(() => {});
  }

  /** One sample: reads the broker, emits `lag.sampled`, returns it. Concurrent calls share one read. */
  sample(): Promise<LagSample> {
    if (!this.sampling) {
      this.sampling = this.doSample().finally(() => {
        this.sampling = undefined;
      });
    }
    return this.sampling as Promise<LagSample>;
  }

  private async connectAdmin(): Promise<Admin> {
    if (this.admin) return this.admin;
    if (!this.connecting) {
      const admin = this.opts.kafka.admin();
      this.connecting = admin.connect().then(() => {
        this.admin = admin;
        return admin;
      });
      this.connecting.catch(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  private async doSample(): Promise<LagSample> {
    const { groupId, topics } = this.opts;
    let admin: Admin;
    let ends: Array<{ topic: string; offsets: Array<{ partition: number; high: string; low: string }> }>;
    let commits: Array<{ topic: string; partitions: Array<{ partition: number; offset: string }> }>;
    try {
      admin = await this.connectAdmin();
      ends = await Promise.all(
        topics.map(async (topic) => ({ topic, offsets: await admin.fetchTopicOffsets(topic) })),
      );
      commits = await admin.fetchOffsets({ groupId, topics: [...topics] });
    } catch (cause) {
      const failure = kafkaFailure(cause, {
        doing: `reading the offsets of group ${groupId} on ${topics.join(", ")}`,
        kafka: this.opts.kafka,
        access: [
          { operation: "DESCRIBE", resourceType: "GROUP", names: [groupId] },
          { operation: "DESCRIBE", resourceType: "TOPIC", names: topics },
        ],
      });
      if (failure) throw failure;
      throw new SluiceError(
        "BROKER_UNAVAILABLE",
        `Cannot read offsets of group "${groupId}" on ${topics.join(", ")}: ${(cause as Error).message}; check the brokers and that the topics exist`,
        { retriable: true, cause },
      );
    }
    const committedBy = new Map<string, bigint>();
    for (const t of commits)
      for (const p of t.partitions)
        committedBy.set(topicPartitionKey(t.topic, p.partition), BigInt(p.offset));

    const rows: Array<{ lag: PartitionLag; low: bigint; end: bigint; position: bigint; hasCommit: boolean }> =
      [];
    for (const { topic, offsets } of ends) {
      for (const o of [...offsets].sort((a, b) => a.partition - b.partition)) {
        if (this.opts.ownedPartitionsOnly && !this.opts.inFlight?.owns(topic, o.partition)) continue;
        const raw = committedBy.get(topicPartitionKey(topic, o.partition)) ?? -1n;
        const low = BigInt(o.low);
        const end = BigInt(o.high);
        const hasCommit = raw >= 0n;
        // No commit yet: the group will start at the log start (Sluice consumes new groups from the
        // beginning), so everything retained is lag.
        const position = hasCommit ? raw : low;
        const lagRecords = end > position ? Number(end - position) : 0;
        rows.push({
          low,
          end,
          position,
          hasCommit,
          lag: {
            topic,
            partition: o.partition,
            committedOffset: hasCommit ? raw.toString() : null,
            endOffset: o.high,
            lagRecords,
            lagSeconds: 0,
          },
        });
      }
    }

    // Owned partitions whose first uncommitted record is in flight here need no broker read.
    const known = new Map<string, number>();
    if (this.opts.inFlight && this.opts.readLagSeconds) {
      for (const row of rows) {
        if (row.lag.lagRecords === 0) continue;
        const ts = this.opts.inFlight.firstUncommitted(row.lag.topic, row.lag.partition, row.position);
        if (ts !== undefined) known.set(topicPartitionKey(row.lag.topic, row.lag.partition), ts);
      }
    }
    try {
      if (!this.probeRefused) await this.readTimestamps(rows, known);
    } catch (err) {
      // Offsets are still worth reporting; timestamps that could not be read show as NaN (unknown).
      if (isAccessFailure(err)) {
        // Refused by an ACL: asking again every sample cannot help. Said once; lag seconds of
        // partitions with nothing in flight stay unknown until the ACL is granted and Sluice restarts.
        this.probeRefused = err;
        this.opts.logger?.error(
          { code: err.code, err: err.message, groupId },
          "lag seconds from the log are off: the timestamp probe was refused",
        );
      } else this.opts.logger?.warn({ err, groupId }, "could not read record timestamps for lag seconds");
    }
    const now = this.opts.nowMs();
    for (const row of rows) {
      const k = topicPartitionKey(row.lag.topic, row.lag.partition);
      const c = this.cache.get(k);
      if (row.lag.lagRecords > 0 && this.opts.readLagSeconds) {
        const inFlightTs = known.get(k);
        if (inFlightTs === undefined && c?.committed === row.position)
          row.lag.lagRecords = dataLag(row.end, c);
        const rec =
          inFlightTs !== undefined
            ? { offset: row.position.toString(), timestampMs: inFlightTs }
            : c?.atOrAfter;
        // null: only markers/aborted records are uncommitted, nothing real waits. undefined: unknown.
        row.lag.lagSeconds = rec
          ? Math.max(0, (now - rec.timestampMs) / 1000)
          : rec === null
            ? 0
            : Number.NaN;
      }
      if (this.opts.readCommittedTimestamps && c?.before)
        row.lag.lastCommittedEventTimestampMs = c.before.timestampMs;
    }

    const sample: LagSample = {
      groupId,
      sampledAtMs: now,
      partitions: rows.map((r) => r.lag),
      topics: this.topicLags(
        rows.map((r) => r.lag),
        now,
      ),
    };
    this.last = sample;
    this.opts.events?.emit("lag.sampled", sample);
    return sample;
  }

  private async readTimestamps(
    rows: Array<{ lag: PartitionLag; low: bigint; end: bigint; position: bigint; hasCommit: boolean }>,
    known: ReadonlyMap<string, number>,
  ): Promise<void> {
    const probes: TimestampProbe[] = [];
    for (const row of rows) {
      const k = topicPartitionKey(row.lag.topic, row.lag.partition);
      const cached = this.cache.get(k);
      const wantAfter = this.opts.readLagSeconds && row.lag.lagRecords > 0 && !known.has(k);
      const wantBefore = this.opts.readCommittedTimestamps && row.hasCommit && row.position > row.low;
      // A commit below the log start (retention deleted records) cannot be read at: start at the log start.
      // biome-ignore lint/complexity/useMathMinMax: bigint operands; Math.max does not take bigints
      const at = row.position > row.low ? row.position : row.low;
      const counting = wantAfter && row.end - at <= BigInt(this.opts.exactCountOffsets);
      // The record at a given offset never changes, so a cached answer for the same committed
      // offset stays right; only "no data record up to end" and exact counts must be re-asked when
      // the end moved.
      const sameEnd = cached?.end === row.end;
      const fresh =
        cached !== undefined &&
        cached.committed === row.position &&
        (!wantAfter ||
          (counting
            ? sameEnd && cached.dataRecords !== undefined
            : cached.atOrAfter || (cached.atOrAfter === null && sameEnd))) &&
        (!wantBefore || cached.before !== undefined);
      if (fresh || (!wantAfter && !wantBefore)) {
        if (!fresh) this.cache.delete(k);
        continue;
      }
      const back = BigInt(this.opts.lookBehindRecords);
      const from = wantBefore && at - back > row.low ? at - back : wantBefore ? row.low : at;
      probes.push({
        topic: row.lag.topic,
        partition: row.lag.partition,
        fromOffset: from.toString(),
        offset: at.toString(),
        untilOffset: (wantAfter && row.end > at ? row.end : at).toString(),
        countDataRecords: counting,
      });
    }
    if (probes.length === 0) return;
    const results = await this.reader.read(probes);
    for (const p of probes) {
      const k = topicPartitionKey(p.topic, p.partition);
      const r = results.get(k);
      const row = rows.find((x) => x.lag.topic === p.topic && x.lag.partition === p.partition)!;
      this.cache.set(k, {
        committed: row.position,
        end: row.end,
        atOrAfter: r?.atOrAfter,
        before: r?.before,
        dataRecords: r?.dataRecords,
      });
    }
  }

  private topicLags(partitions: PartitionLag[], now: number): TopicLag[] {
    // Throughput from per-partition progress, counting only partitions present in both samples: with
    // ownedPartitionsOnly a partition joins or leaves the sample on every rebalance, and summing
    // committed offsets per topic would turn its whole offset into a one-sample throughput spike.
    const prev = this.prevCommitted;
    const byTopic = new Map<string, { lag: number; progressed: bigint; measured: boolean }>();
    const positions = new Map<string, bigint>();
    for (const p of partitions) {
      const t = byTopic.get(p.topic) ?? { lag: 0, progressed: 0n, measured: false };
      t.lag += p.lagRecords;
      // With no commit the group's position is the log start, i.e. end − lag.
      const position =
        p.committedOffset === null ? BigInt(p.endOffset) - BigInt(p.lagRecords) : BigInt(p.committedOffset);
      const k = topicPartitionKey(p.topic, p.partition);
      positions.set(k, position);
      const before = prev?.byPartition.get(k);
      if (before !== undefined) {
        t.measured = true;
        if (position > before) t.progressed += position - before;
      }
      byTopic.set(p.topic, t);
    }
    const out: TopicLag[] = [];
    for (const [topic, t] of byTopic) {
      if (prev && t.measured && now > prev.atMs) {
        const rate = Number(t.progressed) / ((now - prev.atMs) / 1000);
        const old = this.throughput.get(topic);
        const a = this.opts.throughputSmoothing;
        this.throughput.set(topic, old === undefined ? rate : a * rate + (1 - a) * old);
      }
      const throughputRecordsPerSecond = this.throughput.get(topic) ?? 0;
      const timeToDrainSeconds =
        t.lag === 0
          ? 0
          : throughputRecordsPerSecond > 0
            ? t.lag / throughputRecordsPerSecond
            : Number.POSITIVE_INFINITY;
      out.push({ topic, lagRecords: t.lag, throughputRecordsPerSecond, timeToDrainSeconds });
    }
    this.prevCommitted = { atMs: now, byPartition: positions };
    return out;
  }
}

/**
 * Data records a partition still holds for the group, from a log read of [committed, end): none
 * when the read found no data record (only markers or aborted records, or nothing), the exact count
 * when the whole range was read, else from the first data record to `end`; `end − committed` when
 * the read did not answer.
 */
function dataLag(end: bigint, probe: CachedProbe): number {
  const offsets = end > probe.committed ? Number(end - probe.committed) : 0;
  if (probe.end === end && probe.atOrAfter === null) return 0;
  if (probe.end === end && probe.dataRecords !== undefined) return probe.dataRecords;
  if (probe.atOrAfter) return Math.min(offsets, Number(end - BigInt(probe.atOrAfter.offset)));
  return offsets;
}
