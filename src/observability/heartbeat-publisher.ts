import type { Logger } from "pino";
import type { FreshnessHeartbeat as HeartbeatRecord } from "../contracts/freshness-heartbeat.js";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { PartitionLag, SluiceEvents } from "../events/sluice-events.js";
import { isAccessFailure, SluiceError } from "../sluice-error.js";
import type { HeartbeatSink } from "./heartbeat-sink.js";
import { PeriodicTask } from "./periodic-task.js";

export interface HeartbeatPublisherOptions {
  /** Where beats go (`KafkaHeartbeatSink` in serve). Connected by `start()`, closed by `stop()`. */
  sink: HeartbeatSink;
  events: SluiceEvents;
  /** Consumer group of the processor (goes into every heartbeat). */
  groupId: string;
  /** This instance (config `observability.instanceId`). */
  instanceId: string;
  /** Period, ms (config `observability.heartbeatIntervalMs`). */
  intervalMs: number;
  /** Clock of `emittedAtMs`. Default `Date.now`. */
  nowMs?: () => number;
  logger?: Logger;
  /**
   * A beat failed with a security failure (isAccessFailure): the schedule stops and this is called
   * once, instead of warning every interval forever.
   */
  onAccessFailure?: (error: SluiceError) => void;
}

interface PartitionState {
  topic: string;
  partition: number;
  /** Next offset to read, from our own commits; -1n when unknown. */
  committed: bigint;
  lastEventMs: number | null;
  lag: PartitionLag | undefined;
  lagSampledAtMs: number;
  completeUpToMs: number | null;
}

/**
 * Publishes, every `intervalMs`, one heartbeat per owned input partition to its `HeartbeatSink` (the
 * freshness topic, `KafkaHeartbeatSink`, in serve), so a downstream reader can tell "results are complete up to event time T" even when no
 * new results arrive. Ownership follows `partitions.assigned`/`revoked`; the committed offset and
 * last committed event time follow `transaction.finished`; lag follows `lag.sampled` (LagMonitor).
 *
 * completeUpToMs: when the latest lag sample found the partition caught up (or our own commits
 * since reached that sample's end offset), every record appended before the sample was taken has a
 * committed outcome, so T = the sample time — this keeps advancing while the input is idle. Else
 * T = event time of the last committed record. T never moves backwards for a partition.
 */
export class HeartbeatPublisher {
  private readonly opts: Required<Omit<HeartbeatPublisherOptions, "logger" | "onAccessFailure">> &
    Pick<HeartbeatPublisherOptions, "logger" | "onAccessFailure">;
  private readonly owned = new Map<string, PartitionState>();
  private readonly offs: Array<() => void> = [];
  private readonly schedule: PeriodicTask;
  private inFlight: Promise<unknown> | undefined;

  constructor(opts: HeartbeatPublisherOptions) {
    const { intervalMs } = opts;
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `observability.heartbeatIntervalMs must be > 0, got ${intervalMs}`,
      );
    }
    if (!opts.groupId || !opts.instanceId) {
      throw new SluiceError("CONFIG_INVALID", "HeartbeatPublisher needs groupId and instanceId");
    }
    this.opts = {
      sink: opts.sink,
      events: opts.events,
      groupId: opts.groupId,
      instanceId: opts.instanceId,
      intervalMs,
      nowMs: opts.nowMs ?? Date.now,
      ...(opts.logger ? { logger: opts.logger } : {}),
      ...(opts.onAccessFailure ? { onAccessFailure: opts.onAccessFailure } : {}),
    };
    this.schedule = new PeriodicTask(
      () => this.beat(),
      intervalMs,
      (err) => {
        if (isAccessFailure(err) && this.opts.onAccessFailure) {
          this.schedule.stop();
          this.opts.onAccessFailure(err);
          return;
        }
        this.opts.logger?.warn({ err }, "freshness heartbeat failed; will retry next interval");
      },
    );
    const ev = opts.events;
    this.offs.push(
      ev.on("partitions.assigned", (e) => {
        for (const p of e.partitions) {
          if (this.owned.has(topicPartitionKey(e.topic, p))) continue;
          this.owned.set(topicPartitionKey(e.topic, p), {
            topic: e.topic,
            partition: p,
            committed: -1n,
            lastEventMs: null,
            lag: undefined,
            lagSampledAtMs: 0,
            completeUpToMs: null,
          });
        }
      }),
      ev.on("partitions.revoked", (e) => {
        for (const p of e.partitions) this.owned.delete(topicPartitionKey(e.topic, p));
      }),
      ev.on("transaction.finished", (e) => {
        const st = this.owned.get(topicPartitionKey(e.topic, e.partition));
        if (!st || e.outcome !== "committed") return;
        if (e.nextOffset !== undefined && BigInt(e.nextOffset) > st.committed)
          st.committed = BigInt(e.nextOffset);
        if (
          e.lastEventTimestampMs !== undefined &&
          (st.lastEventMs === null || e.lastEventTimestampMs > st.lastEventMs)
        ) {
          st.lastEventMs = e.lastEventTimestampMs;
        }
      }),
      ev.on("lag.sampled", (e) => {
        if (e.groupId !== this.opts.groupId) return;
        for (const lag of e.partitions) {
          const st = this.owned.get(topicPartitionKey(lag.topic, lag.partition));
          if (!st) continue;
          st.lag = lag;
          st.lagSampledAtMs = e.sampledAtMs;
          if (lag.committedOffset !== null && BigInt(lag.committedOffset) > st.committed) {
            st.committed = BigInt(lag.committedOffset);
          }
          if (
            lag.lastCommittedEventTimestampMs !== undefined &&
            (st.lastEventMs === null || lag.lastCommittedEventTimestampMs > st.lastEventMs)
          ) {
            st.lastEventMs = lag.lastCommittedEventTimestampMs;
          }
        }
      }),
    );
  }

  /** Connects the sink and publishes now and then every `intervalMs`. */
  async start(): Promise<void> {
    if (this.schedule.isRunning) return;
    await this.opts.sink.connect();
    this.schedule.start();
  }

  /** Stops the schedule, waits for a heartbeat in flight, closes the sink, unsubscribes. Safe twice. */
  async stop(): Promise<void> {
    this.schedule.stop();
    await this.inFlight?.catch(() => undefined);
    for (const off of this.offs.splice(0)) off();
    await this.opts.sink.close().catch(() => {});
  }

  /** The heartbeats that would be published now, one per owned partition (no I/O). */
  snapshot(): HeartbeatRecord[] {
    const now = this.opts.nowMs();
    return [...this.owned.values()]
      .sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1))
      .map((st) => {
        const lag = st.lag;
        const caughtUp = lag !== undefined && (lag.lagRecords === 0 || st.committed >= BigInt(lag.endOffset));
        const candidate = caughtUp ? st.lagSampledAtMs : st.lastEventMs;
        if (candidate !== null && (st.completeUpToMs === null || candidate > st.completeUpToMs)) {
          st.completeUpToMs = candidate;
        }
        const lagRecords = lag === undefined ? -1 : caughtUp ? 0 : lag.lagRecords;
        const lagSeconds =
          lag === undefined || Number.isNaN(lag.lagSeconds) ? -1 : caughtUp ? 0 : lag.lagSeconds;
        return {
          instanceId: this.opts.instanceId,
          groupId: this.opts.groupId,
          topic: st.topic,
          partition: st.partition,
          committedOffset: Number(st.committed),
          lastCommittedEventTimestampMs: st.lastEventMs,
          lagRecords,
          lagSeconds,
          emittedAtMs: now,
          completeUpToMs: st.completeUpToMs,
        };
      });
  }

  /** Publishes one heartbeat per owned partition now; returns what was sent. */
  async beat(): Promise<HeartbeatRecord[]> {
    const beats = this.snapshot();
    const p = this.opts.sink.publish(beats);
    this.inFlight = p;
    try {
      await p;
      return beats;
    } finally {
      if (this.inFlight === p) this.inFlight = undefined;
    }
  }
}
