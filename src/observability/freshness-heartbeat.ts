import type { Kafka, Producer } from "kafkajs";
import type { Logger } from "pino";
import {
  encodeHeartbeat,
  HEARTBEAT_CONTENT_TYPE,
  type FreshnessHeartbeat as HeartbeatRecord,
} from "../contracts/freshness-heartbeat.js";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { PartitionLag, SluiceEvents } from "../events/sluice-events.js";
import { kafkaFailure } from "../kafka/kafka-failure.js";
import { isAccessFailure, SluiceError } from "../sluice-error.js";
import { PeriodicTask } from "./periodic-task.js";

export interface FreshnessHeartbeatOptions {
  kafka: Kafka;
  events: SluiceEvents;
  /** Consumer group of the processor (goes into every heartbeat). */
  groupId: string;
  /** This instance (config `observability.instanceId`). */
  instanceId: string;
  /** Heartbeat topic (config `topics.freshness`). Default `"sluice.freshness"`. */
  topic?: string;
  /** Period, ms (config `observability.heartbeatIntervalMs`). Default 5000. */
  intervalMs?: number;
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
 * Publishes, every `intervalMs`, one Avro heartbeat per owned input partition to the freshness
 * topic, so a downstream reader can tell "results are complete up to event time T" even when no
 * new results arrive. Ownership follows `partitions.assigned`/`revoked`; the committed offset and
 * last committed event time follow `transaction.finished`; lag follows `lag.sampled` (LagMonitor).
 *
 * completeUpToMs: when the latest lag sample found the partition caught up (or our own commits
 * since reached that sample's end offset), every record appended before the sample was taken has a
 * committed outcome, so T = the sample time — this keeps advancing while the input is idle. Else
 * T = event time of the last committed record. T never moves backwards for a partition.
 */
export class FreshnessHeartbeat {
  private readonly opts: Required<Omit<FreshnessHeartbeatOptions, "logger" | "onAccessFailure">> &
    Pick<FreshnessHeartbeatOptions, "logger" | "onAccessFailure">;
  private readonly owned = new Map<string, PartitionState>();
  private readonly offs: Array<() => void> = [];
  private producer: Producer | undefined;
  private readonly schedule: PeriodicTask;
  private inFlight: Promise<unknown> | undefined;

  constructor(opts: FreshnessHeartbeatOptions) {
    const intervalMs = opts.intervalMs ?? 5000;
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `observability.heartbeatIntervalMs must be > 0, got ${intervalMs}`,
      );
    }
    if (!opts.groupId || !opts.instanceId) {
      throw new SluiceError("CONFIG_INVALID", "FreshnessHeartbeat needs groupId and instanceId");
    }
    this.opts = {
      kafka: opts.kafka,
      events: opts.events,
      groupId: opts.groupId,
      instanceId: opts.instanceId,
      topic: opts.topic ?? "sluice.freshness",
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
        this.opts.logger?.warn(
          { err, topic: this.opts.topic },
          "freshness heartbeat failed; will retry next interval",
        );
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

  /** Connects the producer and publishes now and then every `intervalMs`. */
  async start(): Promise<void> {
    if (this.schedule.isRunning) return;
    await this.connect();
    this.schedule.start();
  }

  /** Stops the schedule, waits for a heartbeat in flight, disconnects, unsubscribes. Safe twice. */
  async stop(): Promise<void> {
    this.schedule.stop();
    await this.inFlight?.catch(() => undefined);
    for (const off of this.offs.splice(0)) off();
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => {});
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
    const run = async () => {
      const producer = await this.connect();
      const beats = this.snapshot();
      if (beats.length === 0) return beats;
      await this.send(producer, {
        topic: this.opts.topic,
        acks: -1,
        messages: beats.map((hb) => ({
          // Keyed per group and input partition, so a compacted freshness topic keeps the latest.
          key: `${hb.groupId}/${hb.topic}/${hb.partition}`,
          value: encodeHeartbeat(hb),
          timestamp: String(hb.emittedAtMs),
          headers: { "content-type": HEARTBEAT_CONTENT_TYPE, "sluice-instance-id": hb.instanceId },
        })),
      });
      return beats;
    };
    const p = run();
    this.inFlight = p;
    try {
      return await p;
    } finally {
      if (this.inFlight === p) this.inFlight = undefined;
    }
  }

  /**
   * A failed send gives the producer back: a producer left connected after a refusal keeps its TLS
   * socket, and with it the whole process, alive. The next beat connects a fresh one.
   */
  private async send(producer: Producer, record: Parameters<Producer["send"]>[0]): Promise<void> {
    try {
      await producer.send(record);
    } catch (error) {
      if (this.producer === producer) this.producer = undefined;
      await producer.disconnect().catch(() => undefined);
      throw this.failure(error, "publishing freshness heartbeats") ?? error;
    }
  }

  private failure(error: unknown, doing: string): SluiceError | undefined {
    return kafkaFailure(error, {
      doing,
      kafka: this.opts.kafka,
      access: [{ operation: "WRITE", resourceType: "TOPIC", names: [this.opts.topic] }],
    });
  }

  private async connect(): Promise<Producer> {
    if (this.producer) return this.producer;
    const producer = this.opts.kafka.producer({ allowAutoTopicCreation: false, idempotent: true });
    try {
      await producer.connect();
    } catch (cause) {
      await producer.disconnect().catch(() => undefined);
      throw (
        this.failure(cause, "connecting the freshness heartbeat producer") ??
        new SluiceError(
          "BROKER_UNAVAILABLE",
          `Cannot connect the freshness heartbeat producer: ${(cause as Error).message}`,
          {
            retriable: true,
            cause,
          },
        )
      );
    }
    this.producer = producer;
    return producer;
  }
}
