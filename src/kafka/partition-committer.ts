import type { Kafka } from "kafkajs";
import { OFFSET_CHECKPOINT_KEY } from "../delivery/changelog-restorer.js";
import { OffsetTracker } from "../delivery/offset-tracker.js";
import {
  AtLeastOncePublisher,
  type OutboundMessage,
  type ResultPublisher,
  TransactionalPublisher,
} from "../delivery/result-publisher.js";
import type { SluiceEventMap, SluiceEventName, SluiceEvents } from "../observability/sluice-events.js";
import { SluiceError } from "../sluice-error.js";

export type { OutboundMessage } from "../delivery/result-publisher.js";
export { classify } from "../delivery/result-publisher.js";

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
   * Completion messages to this topic (dedup changelog entries) are bookkeeping, published after the
   * outputs in at-least-once mode.
   */
  offsetCheckpoint?: { topic: string; partition: number };
  /**
   * true (default): every commit is one Kafka transaction with the consumer offset (exactly-once
   * style, docs/exactly-once.md). false: at-least-once, a plain idempotent producer followed by
   * `commitOffset` (required then).
   */
  transactions?: boolean;
  /** At-least-once only: commits the group offset (next offset to read) through the consumer. */
  commitOffset?: (nextOffset: string) => Promise<void>;
  /** Called once when a commit fails; the committer is dead afterwards (sticky error). */
  onFailure: (error: SluiceError) => void;
}

/**
 * Publishes the outputs of one input partition with its consumer offset: in Kafka transactions
 * (default) or, with `transactions: false`, at least once (see result-publisher.ts). This class owns
 * what both modes share: the contiguous completed prefix, the commit cadence, sticky errors, events.
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
  private readonly publisher: ResultPublisher;
  private readonly opts: PartitionCommitterOptions;
  private readonly commitIntervalMs: number;
  private readonly tracker = new OffsetTracker<RecordCompletion>();
  private timer: NodeJS.Timeout | undefined;
  private committing: Promise<void> | undefined;
  private failure: SluiceError | undefined;
  private closed: Promise<void> | undefined;

  private constructor(opts: PartitionCommitterOptions, publisher: ResultPublisher) {
    this.opts = opts;
    this.topic = opts.topic;
    this.partition = opts.partition;
    this.publisher = publisher;
    this.commitIntervalMs = opts.commitIntervalMs ?? 100;
  }

  static transactionalId(groupId: string, topic: string, partition: number): string {
    return TransactionalPublisher.transactionalId(groupId, topic, partition);
  }

  /**
   * Connects the producer. In transactions mode it also initialises the transactional id, fencing
   * any previous owner (do this before reading the committed offset).
   */
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
    const transactions = opts.transactions ?? true;
    if (!transactions && !opts.commitOffset) {
      throw new SluiceError(
        "CONFIG_INVALID",
        "PartitionCommitter: transactions=false (at-least-once) needs commitOffset to commit the consumer offset",
      );
    }
    const target = { kafka: opts.kafka, groupId: opts.groupId, topic: opts.topic, partition: opts.partition };
    const publisher: ResultPublisher = transactions
      ? await TransactionalPublisher.create(target, { transactionTimeoutMs })
      : await AtLeastOncePublisher.create(target, opts.commitOffset as (nextOffset: string) => Promise<void>);
    const committer = new PartitionCommitter(
      { ...opts, commitIntervalMs, transactionTimeoutMs, transactions },
      publisher,
    );
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
      await this.publisher.close();
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
    // Changelog entries and the checkpoint are bookkeeping: at-least-once publishes them only after
    // the outputs are durable (a changelog entry must never stand for an unpublished result).
    const checkpoint = this.opts.offsetCheckpoint;
    const outputs: OutboundMessage[] = [];
    const bookkeeping: OutboundMessage[] = [];
    for (const c of completions) {
      for (const m of c.messages)
        (checkpoint && m.topic === checkpoint.topic ? bookkeeping : outputs).push(m);
    }
    if (checkpoint) {
      bookkeeping.push({
        topic: checkpoint.topic,
        partition: checkpoint.partition,
        key: OFFSET_CHECKPOINT_KEY,
        value: nextOffset,
      });
    }
    const records = completions.length;
    try {
      await this.publisher.publish({ outputs, bookkeeping, nextOffset });
    } catch (error) {
      const failure =
        error instanceof SluiceError
          ? error
          : new SluiceError(
              "INTERNAL",
              `publishing ${this.topic}[${this.partition}] failed: ${String(error)}`,
              {
                cause: error,
              },
            );
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
