import type { IHeaders, Kafka, Producer } from "kafkajs";
import { OFFSET_CHECKPOINT_KEY } from "../delivery/changelog-restorer.js";
import { OffsetTracker } from "../delivery/offset-tracker.js";
import type { SluiceEventMap, SluiceEventName, SluiceEvents } from "../observability/sluice-events.js";
import { SluiceError } from "../sluice-error.js";

/** One record to publish inside a partition's transaction. */
export interface OutboundMessage {
  topic: string;
  key: Buffer | string | null;
  value: Buffer | string | null;
  headers?: IHeaders;
  /** Target partition; omitted = the default partitioner (by key). */
  partition?: number;
  /** Epoch ms as a string (kafkajs convention); omitted = producer time. */
  timestamp?: string;
}

/** What finishing one input record produced; published when its transaction commits. */
export interface RecordCompletion {
  messages: OutboundMessage[];
  outcome: "result" | "dead_letter" | "duplicate";
  status?: "ok" | "expired" | "rejected" | "error";
  errorCode?: string;
  /** Timestamp of the input record, epoch ms. */
  recordTimestampMs: number;
}

export interface PartitionCommitterOptions {
  kafka: Kafka;
  groupId: string;
  topic: string;
  partition: number;
  events: SluiceEvents;
  /** How long a transaction may collect completed records before it commits, ms. Default 100. */
  commitIntervalMs?: number;
  /** Broker-side transaction timeout, ms. Default 60000. */
  transactionTimeoutMs?: number;
  /**
   * Changelog partition that receives the offset checkpoint record (OFFSET_CHECKPOINT_KEY) in every
   * transaction; see changelog-restorer.ts for why. Omit to rely on the group's committed offset only.
   */
  offsetCheckpoint?: { topic: string; partition: number };
  /** Called once when a transaction fails; the committer is dead afterwards (sticky error). */
  onFailure: (error: SluiceError) => void;
}

/**
 * Publishes the outputs of one input partition with its consumer offset in Kafka transactions.
 *
 * kafkajs 2.2.4 has no KIP-447, so fencing works per input partition: the transactional id is
 * derived from group, topic and partition, and whoever initialises it last owns the partition; an
 * older owner's next transactional request fails with INVALID_PRODUCER_EPOCH. `create()` performs
 * that initialisation before returning, which also aborts any transaction the previous owner left
 * open. Only the contiguous completed prefix of the partition is committed (see OffsetTracker).
 *
 * Errors are sticky: after a failed transaction the committer refuses further work and reports
 * once through `onFailure`; the owner drops in-flight work and builds a fresh committer.
 */
export class PartitionCommitter {
  readonly topic: string;
  readonly partition: number;
  private readonly producer: Producer;
  private readonly opts: PartitionCommitterOptions;
  private readonly commitIntervalMs: number;
  private readonly tracker = new OffsetTracker<RecordCompletion>();
  private timer: NodeJS.Timeout | undefined;
  private committing: Promise<void> | undefined;
  private failure: SluiceError | undefined;
  private closed: Promise<void> | undefined;

  private constructor(opts: PartitionCommitterOptions, producer: Producer) {
    this.opts = opts;
    this.topic = opts.topic;
    this.partition = opts.partition;
    this.producer = producer;
    this.commitIntervalMs = opts.commitIntervalMs ?? 100;
  }

  static transactionalId(groupId: string, topic: string, partition: number): string {
    return `sluice-${groupId}-${topic}-${partition}`;
  }

  /** Connects and initialises the transactional producer, fencing any previous owner. */
  static async create(opts: PartitionCommitterOptions): Promise<PartitionCommitter> {
    const commitIntervalMs = opts.commitIntervalMs ?? 100;
    const transactionTimeoutMs = opts.transactionTimeoutMs ?? 60_000;
    if (!Number.isInteger(commitIntervalMs) || commitIntervalMs < 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `commitIntervalMs must be an integer >= 0, got ${commitIntervalMs}`,
      );
    }
    if (commitIntervalMs >= transactionTimeoutMs) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `commitIntervalMs (${commitIntervalMs}) must be below transactionTimeoutMs (${transactionTimeoutMs})`,
      );
    }
    const producer = opts.kafka.producer({
      transactionalId: PartitionCommitter.transactionalId(opts.groupId, opts.topic, opts.partition),
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: transactionTimeoutMs,
      allowAutoTopicCreation: false,
    });
    try {
      await producer.connect();
      // kafkajs initialises the transactional id lazily on the first transaction(); do it now so
      // the previous owner is fenced (and its open transaction aborted) before we read offsets.
      const txn = await producer.transaction();
      await txn.abort(); // nothing was added: local state change only, no EndTxn request
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw classify(error, opts.topic, opts.partition, "initialising the transactional producer");
    }
    const committer = new PartitionCommitter({ ...opts, commitIntervalMs, transactionTimeoutMs }, producer);
    committer.schedule();
    return committer;
  }

  /** Registers a delivered record; offsets must increase. */
  track(offset: string): void {
    this.throwIfFailed();
    this.tracker.track(offset);
  }

  /** Records the outputs of a finished record; they go out with the next transaction. */
  complete(offset: string, completion: RecordCompletion): void {
    if (this.failure || this.closed) return;
    this.tracker.complete(offset, completion);
    if (this.commitIntervalMs === 0) void this.commitNow();
  }

  /** Commits whatever is committable now and waits for it. Throws the sticky error if any. */
  async flush(): Promise<void> {
    await this.commitNow();
    this.throwIfFailed();
  }

  /**
   * Stops the cadence and disconnects. With `commit: true` (clean shutdown) the committable prefix
   * is committed first; otherwise uncommitted work is left for the next owner. Safe to call twice.
   */
  close(options: { commit: boolean }): Promise<void> {
    this.closed ??= (async () => {
      if (this.timer) clearTimeout(this.timer);
      this.timer = undefined;
      if (options.commit && !this.failure) await this.commitNow().catch(() => undefined);
      else if (this.committing) await this.committing.catch(() => undefined);
      await this.producer.disconnect().catch(() => undefined);
    })();
    return this.closed;
  }

  private schedule(): void {
    if (this.commitIntervalMs === 0 || this.failure || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.commitNow().finally(() => this.schedule());
    }, this.commitIntervalMs);
    this.timer.unref?.();
  }

  private commitNow(): Promise<void> {
    // Serialise transactions: the next one waits for the current one.
    const run = async (): Promise<void> => {
      if (this.failure) return;
      const range = this.tracker.takeCommittable();
      if (!range) return;
      await this.runTransaction(range.nextOffset, range.completions);
    };
    const next = (this.committing ?? Promise.resolve()).then(run, run);
    this.committing = next;
    return next;
  }

  private async runTransaction(nextOffset: string, completions: RecordCompletion[]): Promise<void> {
    const started = Date.now();
    const byTopic = new Map<string, OutboundMessage[]>();
    for (const c of completions) {
      for (const m of c.messages) {
        const list = byTopic.get(m.topic) ?? [];
        if (list.length === 0) byTopic.set(m.topic, list);
        list.push(m);
      }
    }
    const records = completions.length;
    const checkpoint = this.opts.offsetCheckpoint;
    if (checkpoint) {
      const list = byTopic.get(checkpoint.topic) ?? [];
      if (list.length === 0) byTopic.set(checkpoint.topic, list);
      list.push({
        topic: checkpoint.topic,
        partition: checkpoint.partition,
        key: OFFSET_CHECKPOINT_KEY,
        value: nextOffset,
      });
    }
    let txn: Awaited<ReturnType<Producer["transaction"]>> | undefined;
    try {
      txn = await this.producer.transaction();
      if (byTopic.size > 0) {
        await txn.sendBatch({
          topicMessages: [...byTopic].map(([topic, messages]) => ({
            topic,
            messages: messages.map(({ key, value, headers, timestamp, partition }) => ({
              key,
              value,
              headers,
              timestamp,
              partition,
            })),
          })),
        });
      }
      await txn.sendOffsets({
        consumerGroupId: this.opts.groupId,
        topics: [{ topic: this.topic, partitions: [{ partition: this.partition, offset: nextOffset }] }],
      });
      await txn.commit();
    } catch (error) {
      const failure = classify(error, this.topic, this.partition, "committing a transaction");
      if (txn && failure.code !== "PRODUCER_FENCED") await txn.abort().catch(() => undefined);
      this.fail(failure, records, Date.now() - started);
      return;
    }
    const now = Date.now();
    const last = completions[completions.length - 1];
    this.emit("transaction.finished", {
      topic: this.topic,
      partition: this.partition,
      outcome: "committed",
      records,
      durationMs: now - started,
      nextOffset,
      ...(last ? { lastEventTimestampMs: last.recordTimestampMs } : {}),
    });
    for (const c of completions) {
      this.emit("record.outcome", {
        topic: this.topic,
        partition: this.partition,
        outcome: c.outcome,
        endToEndMs: now - c.recordTimestampMs,
        ...(c.status ? { status: c.status } : {}),
        ...(c.errorCode ? { errorCode: c.errorCode } : {}),
      });
    }
  }

  private fail(error: SluiceError, records: number, durationMs: number): void {
    if (this.failure) return;
    this.failure = error;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.emit("transaction.finished", {
      topic: this.topic,
      partition: this.partition,
      outcome: error.code === "PRODUCER_FENCED" ? "fenced" : "failed",
      records,
      durationMs,
    });
    this.opts.onFailure(error);
  }

  /** Subscribers must not break a commit (a throw here would become an unhandled rejection). */
  private emit<K extends SluiceEventName>(name: K, payload: SluiceEventMap[K]): void {
    try {
      this.opts.events.emit(name, payload);
    } catch {
      // observability bug; the commit itself succeeded or failed independently of it
    }
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}

/** Maps a kafkajs error (possibly wrapped in retry errors) to PRODUCER_FENCED or TRANSACTION_FAILED. */
export function classify(error: unknown, topic: string, partition: number, doing: string): SluiceError {
  const fenced = errorChain(error).some((e) => {
    const type = (e as { type?: unknown }).type;
    return (
      type === "INVALID_PRODUCER_EPOCH" ||
      type === "PRODUCER_FENCED" ||
      type === "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" ||
      (e instanceof Error && /fenced|producer epoch/i.test(e.message))
    );
  });
  const message = error instanceof Error ? error.message : String(error);
  return fenced
    ? new SluiceError(
        "PRODUCER_FENCED",
        `partition ${topic}[${partition}] is owned by another instance now (fenced while ${doing}); its in-flight work is dropped and the partition is reclaimed from its committed offset if still assigned`,
        { cause: error, context: { topic, partition } },
      )
    : new SluiceError("TRANSACTION_FAILED", `${doing} for ${topic}[${partition}] failed: ${message}`, {
        retriable: true,
        cause: error,
        context: { topic, partition },
      });
}

function errorChain(error: unknown): unknown[] {
  const out: unknown[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 8; depth++) {
    out.push(current);
    const c = current as { originalError?: unknown; cause?: unknown };
    current = c.originalError ?? c.cause;
  }
  return out;
}
