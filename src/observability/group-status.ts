import { SluiceError } from "../sluice-error.js";
import type { GroupOffsetsReader } from "./group-offsets-reader.js";
import { LagSampler, TIMESTAMP_READ_TIMEOUT_MS } from "./lag-sampler.js";
import type { RecordTimestampReader } from "./record-timestamp-reader.js";

export interface GroupStatusOptions {
  /** The group's offsets (`KafkaGroupOffsetsReader`); closed when the status has been read. */
  offsets: GroupOffsetsReader;
  /** Record timestamps (`KafkaRecordTimestampReader`). */
  timestamps: RecordTimestampReader;
  groupId: string;
  /** Topics to report. Default: every topic the group has committed offsets for. */
  topics?: readonly string[];
  /** Clock of `sampledAtMs` and the ages. Default `Date.now`. */
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
 * seconds and freshness of a consumer group, read from the broker alone (no instance needs to run),
 * through the same `LagSampler` as the lag monitor.
 */
export async function readGroupStatus(opts: GroupStatusOptions): Promise<GroupStatus> {
  try {
    let topics = opts.topics ? [...opts.topics] : [];
    if (topics.length === 0) {
      topics = await opts.offsets.committedTopics(opts.groupId);
      if (topics.length === 0) {
        throw new SluiceError(
          "INPUT_INVALID",
          `Consumer group "${opts.groupId}" has no committed offsets; name the topics to report with --topic`,
        );
      }
    }
    const sampler = new LagSampler({
      offsets: opts.offsets,
      timestamps: opts.timestamps,
      groupId: opts.groupId,
      topics,
      readCommittedTimestamps: true,
      probeTimeoutMs: TIMESTAMP_READ_TIMEOUT_MS,
      ...(opts.nowMs ? { nowMs: opts.nowMs } : {}),
    });
    const sample = await sampler.sample();
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
    await opts.offsets.close();
  }
}
