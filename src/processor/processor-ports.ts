import type { RecordHeaders } from "../contracts/codec.js";
import type { TopicPartition } from "../contracts/topic-partition.js";
import type { Deduplicator } from "../delivery/deduplicator.js";
import type { RecordCompletion } from "../delivery/outbound-message.js";
import type { AttachedUnit } from "../delivery/partition-committer.js";
import type { SluiceError } from "../sluice-error.js";

/**
 * The seams of the stream processor. The composition root (src/app/stream-processor-factory.ts)
 * plugs in the Kafka implementations (src/kafka/); unit tests plug in fakes.
 */

/** One fetched input record (a kafkajs `KafkaMessage` fits). */
export interface FetchedRecord {
  offset: string;
  key?: Buffer | null;
  value: Buffer | null;
  headers?: RecordHeaders;
  /** Epoch ms as a string (kafkajs convention). */
  timestamp: string;
}

/** Callbacks of a record source; all run on the consumer's task and must be quick. */
export interface RecordSourceHandlers {
  /** The full assignment of a new group generation (eager rebalancing: kept partitions appear again). */
  onAssigned(assignment: TopicPartition[]): void;
  /** A rebalance has started. */
  onRebalancing(): void;
  /**
   * `accepted`: all taken, continue after them; `refused`: pause the partition and fetch them again
   * later; `ignored`: drop them unresolved (the owner has just called `seek`).
   */
  onRecords(
    topic: string,
    partition: number,
    records: FetchedRecord[],
    fetchedOffset: string,
  ): "accepted" | "refused" | "ignored";
  /** The source stopped for good. */
  onFatal(error: SluiceError): void;
}

/** The consumer group member (src/kafka/read/consumer-loop.ts). */
export interface RecordSource {
  start(handlers: RecordSourceHandlers): Promise<void>;
  pause(partitions: readonly TopicPartition[]): void;
  resume(partitions: readonly TopicPartition[]): void;
  seek(tp: TopicPartition, offset: string): void;
  close(): Promise<void>;
}

/**
 * What a PartitionTask needs of its partition's committer (src/delivery/partition-committer.ts implements it;
 * unit tests pass fakes).
 */
export interface TaskCommitter {
  /** Records tracked and not yet committed. */
  readonly pendingRecords: number;
  track(offset: string): void;
  complete(offset: string, completion: RecordCompletion): void;
  commitSoon(): void;
  /**
   * Records that go out with the first transaction committing the input offset `atOffset` or beyond
   * (or alone, at `atOffset`, once nothing is pending): a model switch boundary
   * (docs/model-upgrades.md). `onCommitted` runs when that transaction committed.
   */
  attach?(unit: AttachedUnit): void;
  flush(): Promise<void>;
  close(options: { commit: boolean }): Promise<void>;
}

/** What a committer tells its task's owner. */
export interface CommitterHooks {
  /** A transaction committed (records waiting for commit went down). */
  onCommitted(): void;
  /** The committer failed for good (sticky); the owner resets the task. */
  onFailure(error: SluiceError): void;
  /**
   * Backfill partitions: the share of the commit cadence they may use now, the SLO guard's
   * `commitShare` lever (in [0.25, 1]: commits spaced, never held; docs/lanes.md "The levers"), read
   * whenever the committer schedules a commit. Absent: always the full cadence.
   */
  commitShare?: () => number;
  /** The task's deduplicator now (undefined until its restore finished): the dedup changelog's. */
  dedup?: () => Deduplicator | undefined;
}

/**
 * Creates the committer of one input partition. In transactions mode this initialises the
 * partition's transactional id, which fences any previous owner: it must finish before the
 * restore reads offsets (src/app/stream-processor-factory.ts builds it).
 */
export type CommitterFactory = (
  tp: TopicPartition,
  changelogTopic: string,
  hooks: CommitterHooks,
) => Promise<TaskCommitter>;

/** What one changelog partition holds after the fence: dedup entries and the input offset committed with them. */
export interface RestoredChangelog {
  /** Per-id records and dedup segments (`segment: true`), in written order (Deduplicator.restore). */
  entries: { key: string; value: Buffer | null; segment?: boolean }[];
  /** Next input offset recorded by the last committed transaction; undefined when none was. */
  nextOffset: string | undefined;
  /** The partition's last model switch boundary record, raw (src/contracts/model-control.ts); undefined when none. */
  modelBoundary?: Buffer | undefined;
}

/** Where a restore reads the partition's state from (src/kafka/: admin offsets, ChangelogReader). */
export interface RestoreSources {
  /** Committed group offset per `topicPartitionKey`; the partition's earliest offset where none. */
  committedOffsets(tps: readonly TopicPartition[]): Promise<Map<string, string>>;
  /** Latest record per key and the offset checkpoint of the given partitions of a changelog topic. */
  readChangelog(topic: string, partitions: readonly number[]): Promise<Map<number, RestoredChangelog>>;
  /** Releases connections; called once, at shutdown, after the last restore. */
  close(): Promise<void>;
}
