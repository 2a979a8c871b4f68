import type { Logger } from "pino";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { PartitionLag } from "../events/sluice-events.js";
import { isAccessFailure, SluiceError } from "../sluice-error.js";
import type { GroupOffsetsReader, PartitionOffsets } from "./group-offsets-reader.js";
import type { InFlightRecords } from "./in-flight-records.js";
import type { ProbedRecord, RecordTimestampReader, TimestampProbe } from "./record-timestamp-reader.js";

/** Records before the committed offset scanned for the last committed data record (freshness from the log). */
export const LOOK_BEHIND_RECORDS = 16;
/**
 * Uncommitted ranges up to this many offsets are read whole and their data records counted exactly;
 * longer ones count from the first data record to the log end (markers inside a backlog then count
 * too, at most one per transaction, which is noise against a backlog that long).
 */
export const EXACT_COUNT_OFFSETS = 1000;
/** The longest one record-timestamp read may take, ms (a sampling loop also caps it at its interval). */
export const TIMESTAMP_READ_TIMEOUT_MS = 5000;

export interface LagSamplerOptions {
  /** The group's offsets (`KafkaGroupOffsetsReader`). */
  offsets: GroupOffsetsReader;
  /** Record timestamps around the committed offsets (`KafkaRecordTimestampReader`). */
  timestamps: RecordTimestampReader;
  /** Consumer group whose committed offsets are measured. */
  groupId: string;
  /** Topics the group consumes. */
  topics: readonly string[];
  /** Timeout of one timestamp read, ms. */
  probeTimeoutMs: number;
  /** Read the timestamp of the first uncommitted record to compute lag seconds (and count data records). Unless `false`. */
  readLagSeconds?: boolean;
  /**
   * Also read the timestamp of the last committed record from the log (freshness without a running
   * instance, e.g. `sluice status`). A running processor learns it from its own commits instead.
   */
  readCommittedTimestamps?: boolean;
  /**
   * In-flight tracker of a running processor: lag seconds of partitions it owns come from the records
   * it has consumed (no broker read). Others fall back to reading the log.
   */
  inFlight?: InFlightRecords;
  /** Report only partitions `inFlight` says this instance owns (requires `inFlight`). */
  ownedPartitionsOnly?: boolean;
  /** Clock of lag seconds and `sampledAtMs`. Default `Date.now`. */
  nowMs?: () => number;
  logger?: Logger;
}

/** One reading of a group's lag, per partition (the topic totals are the monitor's). */
export interface PartitionLagReading {
  sampledAtMs: number;
  partitions: PartitionLag[];
}

interface CachedProbe {
  committed: bigint;
  end: bigint;
  atOrAfter: ProbedRecord | null | undefined;
  before: ProbedRecord | null | undefined;
  /** Data records in [committed, end) when the whole range was read. */
  dataRecords: number | undefined;
}

interface Row {
  lag: PartitionLag;
  low: bigint;
  end: bigint;
  position: bigint;
  hasCommit: boolean;
}

/**
 * One lag reading of a consumer group, from its ports: the group's offsets, then, for lagging
 * partitions, the timestamp of the record at the committed offset (in flight, else from the log).
 *
 * Lag records counts data records only: transaction markers and aborted records are not work, so a
 * topic written by a transactional producer reads 0 at rest (the committed offset of a caught-up
 * group stops before the last commit marker, so `end − committed` would stay ≥ 1 forever;
 * docs/design.md §3, KEDA#5675, Burrow#570). With no data record after the committed offset the lag is 0;
 * a short uncommitted range is counted exactly, a long one from its first data record to the log
 * end (`EXACT_COUNT_OFFSETS`). Lag seconds = now − timestamp of the first data record at or after the
 * committed offset, 0 when nothing real waits, NaN when it could not be read. Reads are cached by
 * committed offset (the record at an offset never changes), so a stuck partition costs no further
 * reads. This is the one home of that computation: `LagMonitor` and `readGroupStatus` both use it.
 */
export class LagSampler {
  private readonly opts: LagSamplerOptions & { topics: string[]; nowMs: () => number };
  private readonly cache = new Map<string, CachedProbe>();
  /** Set when an ACL refused the timestamp probe: no more probes (see sample()). */
  private probeRefused: SluiceError | undefined;

  constructor(opts: LagSamplerOptions) {
    if (!opts.groupId) throw new SluiceError("CONFIG_INVALID", "LagMonitor needs a consumer groupId");
    if (opts.topics.length === 0)
      throw new SluiceError("CONFIG_INVALID", "LagMonitor needs at least one topic");
    if (!Number.isFinite(opts.probeTimeoutMs) || opts.probeTimeoutMs <= 0) {
      throw new SluiceError("CONFIG_INVALID", `probeTimeoutMs must be > 0, got ${opts.probeTimeoutMs}`);
    }
    if (opts.ownedPartitionsOnly && !opts.inFlight) {
      throw new SluiceError(
        "CONFIG_INVALID",
        "LagMonitor ownedPartitionsOnly needs an inFlight tracker to know ownership",
      );
    }
    this.opts = { ...opts, topics: [...new Set(opts.topics)], nowMs: opts.nowMs ?? Date.now };
  }

  get groupId(): string {
    return this.opts.groupId;
  }

  /** Reads the broker (and the log where needed) once. */
  async sample(): Promise<PartitionLagReading> {
    const { groupId, topics, inFlight } = this.opts;
    const readLagSeconds = this.opts.readLagSeconds !== false;
    const rows = this.rows(await this.opts.offsets.partitionOffsets(groupId, topics));

    // Owned partitions whose first uncommitted record is in flight here need no broker read.
    const known = new Map<string, number>();
    if (inFlight && readLagSeconds) {
      for (const row of rows) {
        if (row.lag.lagRecords === 0) continue;
        const ts = inFlight.firstUncommitted(row.lag.topic, row.lag.partition, row.position);
        if (ts !== undefined) known.set(topicPartitionKey(row.lag.topic, row.lag.partition), ts);
      }
    }
    try {
      if (!this.probeRefused) await this.readTimestamps(rows, known, readLagSeconds);
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
      if (row.lag.lagRecords > 0 && readLagSeconds) {
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
    return { sampledAtMs: now, partitions: rows.map((r) => r.lag) };
  }

  /** `end − position` per reported partition: offsets, not yet data records. */
  private rows(offsets: readonly PartitionOffsets[]): Row[] {
    const rows: Row[] = [];
    for (const o of offsets) {
      if (this.opts.ownedPartitionsOnly && !this.opts.inFlight?.owns(o.topic, o.partition)) continue;
      const low = BigInt(o.logStartOffset);
      const end = BigInt(o.logEndOffset);
      const hasCommit = o.committedOffset !== null;
      // No commit yet: the group will start at the log start (Sluice consumes new groups from the
      // beginning), so everything retained is lag.
      const position = o.committedOffset !== null ? BigInt(o.committedOffset) : low;
      rows.push({
        low,
        end,
        position,
        hasCommit,
        lag: {
          topic: o.topic,
          partition: o.partition,
          committedOffset: o.committedOffset,
          endOffset: o.logEndOffset,
          lagRecords: end > position ? Number(end - position) : 0,
          lagSeconds: 0,
        },
      });
    }
    return rows;
  }

  private async readTimestamps(
    rows: Row[],
    known: ReadonlyMap<string, number>,
    readLagSeconds: boolean,
  ): Promise<void> {
    const probes: TimestampProbe[] = [];
    for (const row of rows) {
      const k = topicPartitionKey(row.lag.topic, row.lag.partition);
      const cached = this.cache.get(k);
      const wantAfter = readLagSeconds && row.lag.lagRecords > 0 && !known.has(k);
      const wantBefore =
        this.opts.readCommittedTimestamps === true && row.hasCommit && row.position > row.low;
      // A commit below the log start (retention deleted records) cannot be read at: start at the log start.
      // biome-ignore lint/complexity/useMathMinMax: bigint operands; Math.max does not take bigints
      const at = row.position > row.low ? row.position : row.low;
      const counting = wantAfter && row.end - at <= BigInt(EXACT_COUNT_OFFSETS);
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
      const back = BigInt(LOOK_BEHIND_RECORDS);
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
    const results = await this.opts.timestamps.read(probes, this.opts.probeTimeoutMs);
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
