import type { Kafka } from "kafkajs";
import { kafkaFailure } from "../kafka/kafka-failure.js";
import { SluiceError } from "../sluice-error.js";
import { LagMonitor } from "./lag-monitor.js";

export interface GroupStatusOptions {
  kafka: Kafka;
  groupId: string;
  /** Topics to report. Default: every topic the group has committed offsets for. */
  topics?: readonly string[];
  /** Timeout of the record-timestamp reads, ms. Default 5000. */
  probeTimeoutMs?: number;
  nowMs?: () => number;
}

export interface PartitionStatus {
  topic: string;
  partition: number;
  /** Next offset the group reads; null when it never committed on this partition. */
  committedOffset: string | null;
  endOffset: string;
  lagRecords: number;
  /** Age of the first uncommitted record, s; 0 when caught up; null when it could not be read. */
  lagSeconds: number | null;
  /** Event time of the last committed record (read from the log), epoch ms. */
  lastCommittedEventTimestampMs: number | null;
  /** now − lastCommittedEventTimestampMs, s. */
  freshnessSeconds: number | null;
  /** Results are complete up to this event time: now when caught up, else the last committed event time. */
  completeUpToMs: number | null;
}

export interface GroupStatus {
  groupId: string;
  sampledAtMs: number;
  partitions: PartitionStatus[];
}

/**
 * What `sluice status` prints: per topic-partition committed offset, end offset, lag in records and
 * seconds and freshness of a consumer group, read from the broker alone (no instance needs to run).
 */
export async function readGroupStatus(opts: GroupStatusOptions): Promise<GroupStatus> {
  let topics = opts.topics ? [...opts.topics] : [];
  if (topics.length === 0) {
    const admin = opts.kafka.admin();
    try {
      await admin.connect();
      const offsets = await admin.fetchOffsets({ groupId: opts.groupId });
      topics = offsets.filter((t) => t.partitions.some((p) => Number(p.offset) >= 0)).map((t) => t.topic);
    } catch (cause) {
      const failure = kafkaFailure(cause, {
        doing: `reading the committed offsets of group ${opts.groupId}`,
        kafka: opts.kafka,
        access: [{ operation: "DESCRIBE", resourceType: "GROUP", names: [opts.groupId] }],
      });
      if (failure) throw failure;
      throw new SluiceError(
        "BROKER_UNAVAILABLE",
        `Cannot read group "${opts.groupId}": ${(cause as Error).message}`,
        {
          retriable: true,
          cause,
        },
      );
    } finally {
      await admin.disconnect().catch(() => {});
    }
    if (topics.length === 0) {
      throw new SluiceError(
        "INPUT_INVALID",
        `Consumer group "${opts.groupId}" has no committed offsets; name the topics to report with --topic`,
      );
    }
  }
  const monitor = new LagMonitor({
    kafka: opts.kafka,
    groupId: opts.groupId,
    topics,
    readCommittedTimestamps: true,
    probeTimeoutMs: opts.probeTimeoutMs ?? 5000,
    ...(opts.nowMs ? { nowMs: opts.nowMs } : {}),
  });
  try {
    const sample = await monitor.sample();
    const now = sample.sampledAtMs;
    return {
      groupId: opts.groupId,
      sampledAtMs: now,
      partitions: sample.partitions.map((p) => {
        const last = p.lastCommittedEventTimestampMs ?? null;
        return {
          topic: p.topic,
          partition: p.partition,
          committedOffset: p.committedOffset,
          endOffset: p.endOffset,
          lagRecords: p.lagRecords,
          lagSeconds: Number.isNaN(p.lagSeconds) ? null : p.lagSeconds,
          lastCommittedEventTimestampMs: last,
          freshnessSeconds: last === null ? null : Math.max(0, (now - last) / 1000),
          completeUpToMs: p.lagRecords === 0 ? now : last,
        };
      }),
    };
  } finally {
    await monitor.stop();
  }
}
