import type { Consumer, Kafka, KafkaMessage } from "kafkajs";
import { partitionsByTopic, type TopicPartition } from "../../contracts/topic-partition.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";

/** Handlers the owner of the loop supplies. All are called on the consumer's task and must be quick. */
export interface ConsumerLoopHandlers {
  /**
   * The full assignment of a new group generation (kafkajs uses eager rebalancing: every rebalance
   * revokes everything and assigns anew; partitions kept across generations appear again).
   */
  onAssigned(assignment: TopicPartition[]): void;
  /** A rebalance has started; a good moment to commit what is committable. */
  onRebalancing(): void;
  /**
   * Fetched records of one partition, in offset order; `fetchedOffset` is the position the fetch
   * started from. Return `"accepted"` when they were all taken into the owner's queue (their offsets
   * are then resolved, so the next fetch continues after them); `"refused"` to pause the partition
   * (the same records are fetched again after `resume`, or from wherever `seek` points); `"ignored"`
   * to drop them without resolving (the owner has just called `seek`).
   */
  onRecords(
    topic: string,
    partition: number,
    messages: KafkaMessage[],
    fetchedOffset: string,
  ): "accepted" | "refused" | "ignored";
  /** The consumer crashed and kafkajs will not restart it. */
  onFatal(error: SluiceError): void;
}

/** Resolved options (defaults and the heartbeat < session rule live in the config schema). */
export interface ConsumerLoopOptions {
  kafka: Kafka;
  groupId: string;
  topics: readonly string[];
  /** Group session timeout, ms. */
  sessionTimeoutMs: number;
  /** Heartbeat interval, ms; below sessionTimeoutMs. */
  heartbeatIntervalMs: number;
  /** Max bytes per partition per fetch, bytes. */
  maxBytesPerPartition: number;
  /** Longest time a fetch waits for data at the broker, ms. Default 100 (latency matters online). */
  maxWaitTimeMs?: number;
}

/**
 * The Kafka consumer lifecycle: join, rebalance notifications, fetch, pause/resume/seek, leave.
 * It owns no processing logic. Offsets are never committed by the consumer (`autoCommit: false`);
 * they go into the partition transactions. `readUncommitted: false` so aborted input is skipped.
 *
 * With `eachBatch` and `eachBatchAutoResolve: false`, kafkajs starts the next fetch of a partition
 * after its last *resolved* offset, so records are resolved as soon as the owner has queued them;
 * this lets fetching batch k+1 overlap inference of batch k.
 */
export class ConsumerLoop {
  private readonly consumer: Consumer;
  private readonly opts: ConsumerLoopOptions;
  private handlers: ConsumerLoopHandlers | undefined;
  private started = false;
  private stopping: Promise<void> | undefined;

  constructor(opts: ConsumerLoopOptions) {
    this.opts = opts;
    this.consumer = opts.kafka.consumer({
      groupId: opts.groupId,
      sessionTimeout: opts.sessionTimeoutMs,
      heartbeatInterval: opts.heartbeatIntervalMs,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      maxBytesPerPartition: opts.maxBytesPerPartition,
      maxWaitTimeInMs: opts.maxWaitTimeMs ?? 100,
      retry: { retries: 10 },
    });
    this.consumer.on(this.consumer.events.GROUP_JOIN, (e) => {
      const assignment: TopicPartition[] = [];
      for (const [topic, partitions] of Object.entries(e.payload.memberAssignment)) {
        for (const partition of partitions) assignment.push({ topic, partition });
      }
      this.handlers?.onAssigned(assignment);
    });
    this.consumer.on(this.consumer.events.REBALANCING, () => this.handlers?.onRebalancing());
    this.consumer.on(this.consumer.events.CRASH, (e) => {
      if (e.payload.restart) return; // kafkajs rejoins by itself
      this.handlers?.onFatal(
        this.failure(e.payload.error) ??
          new SluiceError("BROKER_UNAVAILABLE", `Kafka consumer stopped: ${e.payload.error.message}`, {
            cause: e.payload.error,
          }),
      );
    });
  }

  /** Joins the group and starts fetching; `handlers` receive every callback from now on. */
  async start(handlers: ConsumerLoopHandlers): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.handlers = handlers;
    try {
      await this.consumer.connect();
      for (const topic of this.opts.topics) await this.consumer.subscribe({ topic, fromBeginning: true });
    } catch (error) {
      throw this.failure(error) ?? error;
    }
    await this.consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: async ({ batch, resolveOffset, pause, heartbeat, isRunning, isStale }) => {
        if (!isRunning() || isStale() || batch.messages.length === 0) return;
        // Batch.fetchedOffset exists at runtime but is missing from kafkajs's typings.
        const fetchedOffset =
          (batch as typeof batch & { fetchedOffset?: string }).fetchedOffset ??
          (batch.messages[0]?.offset as string);
        const verdict = handlers.onRecords(
          batch.topic,
          batch.partition,
          batch.messages,
          String(fetchedOffset),
        );
        if (verdict === "refused") {
          pause();
          return;
        }
        if (verdict === "ignored") return;
        resolveOffset(batch.lastOffset());
        await heartbeat();
      },
    });
  }

  /** A security or connectivity failure of the group member, naming the group and topics it reads. */
  private failure(error: unknown): SluiceError | undefined {
    const access: KafkaAccess[] = [
      { operation: "READ", resourceType: "GROUP", names: [this.opts.groupId] },
      { operation: "READ", resourceType: "TOPIC", names: this.opts.topics },
    ];
    return kafkaFailure(error, {
      doing: `consuming as group ${this.opts.groupId}`,
      kafka: this.opts.kafka,
      access,
    });
  }

  pause(partitions: readonly TopicPartition[]): void {
    if (partitions.length > 0) this.consumer.pause(group(partitions));
  }

  resume(partitions: readonly TopicPartition[]): void {
    if (partitions.length > 0) this.consumer.resume(group(partitions));
  }

  /** Next fetch of the partition starts at `offset` (takes effect at the next fetch). */
  seek(tp: TopicPartition, offset: string): void {
    this.consumer.seek({ topic: tp.topic, partition: tp.partition, offset });
  }

  /**
   * Commits `offset` (the next offset to read) for the partition as this group member (at-least-once
   * mode; the transactional mode commits offsets inside its transactions instead). The broker rejects
   * it if our group generation is stale.
   */
  async commitOffset(tp: TopicPartition, offset: string): Promise<void> {
    await this.consumer.commitOffsets([{ topic: tp.topic, partition: tp.partition, offset }]);
  }

  /** Leaves the group and disconnects. Safe to call twice (shares the in-flight promise). */
  close(): Promise<void> {
    this.stopping ??= this.consumer.disconnect().catch(() => undefined);
    return this.stopping;
  }
}

function group(partitions: readonly TopicPartition[]): { topic: string; partitions: number[] }[] {
  return [...partitionsByTopic(partitions)].map(([topic, ps]) => ({ topic, partitions: ps }));
}
