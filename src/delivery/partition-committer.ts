import type { SluiceEventMap, SluiceEvents } from "../events/sluice-events.js";
import { SluiceError } from "../sluice-error.js";
import type { Clock } from "../time/clock.js";
import { NO_TRACING_TRACER, type PipelineTracer } from "../tracing/pipeline-tracer.js";
import { withoutPayload } from "./completion-builder.js";
import type { DedupChangelog } from "./dedup-changelog.js";
import { type CommittableRange, OffsetTracker } from "./offset-tracker.js";
import { completionBytes, type OutboundMessage, type RecordCompletion } from "./outbound-message.js";
import { retrySizeRefusals } from "./size-refusal.js";
import { transactionRecords } from "./transaction-records.js";

/** Records a committer sends with a later transaction (`PartitionCommitter.attach`). */
export interface AttachedUnit {
  outputs: OutboundMessage[];
  bookkeeping: OutboundMessage[];
  /** The unit rides with the first transaction whose consumer offset is at least this (decimal). */
  atOffset: string;
  onCommitted: () => void;
}

/**
 * What one commit of an input partition publishes: the outputs (results, dead letters), the
 * bookkeeping (dedup changelog segments and tombstones, and the offset checkpoint) and the consumer offset
 * (`nextOffset` = last covered offset + 1).
 */
export interface PublishUnit {
  outputs: OutboundMessage[];
  bookkeeping: OutboundMessage[];
  nextOffset: string;
  /** Called once everything is sent (with transactions: the offsets too), before the commit. */
  sent?: () => void;
}

/** The code a request span ends with when its committer closes before its record was committed. */
export const NOT_COMMITTED = "PARTITION_CLOSED";

/**
 * How a `PartitionCommitter` makes a unit visible (src/kafka/write/result-publisher.ts: in a Kafka
 * transaction, or at least once). Implementations throw a classified `SluiceError` (PRODUCER_FENCED,
 * TRANSACTION_FAILED or PUBLISH_FAILED) and are not used again after a throw, except
 * PUBLISH_TOO_LARGE: the broker refused a send as too large, the unit was aborted (transactions) and
 * the publisher stays usable, its `SendBound` halved when the refused send held several records, and
 * names the send in the error's context (`records`, `recordIndex` of its first record in outputs
 * then bookkeeping; src/delivery/size-refusal.ts), so the caller can publish the unit again.
 */
export interface ResultPublisher {
  publish(unit: PublishUnit): Promise<void>;
  close(): Promise<void>;
}

/**
 * Resolved options (defaults and cross-field rules live in the config schema, src/config). The
 * processor's composition root fills them from the configuration.
 */
export interface PartitionCommitterOptions {
  topic: string;
  partition: number;
  events: SluiceEvents;
  /** How long a transaction may collect completed records before it commits, ms (0 = at once). */
  commitIntervalMs: number;
  /**
   * Changelog partition that receives the offset checkpoint record (OFFSET_CHECKPOINT_KEY) in every
   * transaction; see changelog-reader.ts for why. Omit to rely on the group's committed offset only.
   */
  offsetCheckpoint?: { topic: string; partition: number };
  /**
   * The partition's dedup changelog: each transaction writes the ids its records remembered as
   * segments, and the tombstones due (src/delivery/dedup-changelog.ts). Omit: no dedup records.
   */
  dedupChangelog?: DedupChangelog;
  /** Most input records per transaction; the rest of the completed prefix follows right after. */
  maxTransactionRecords: number;
  /**
   * Most estimated output bytes (key + value + headers of every record) per transaction, bytes; at
   * least one input record always goes.
   */
  maxTransactionBytes: number;
  /**
   * Where a record's outputs go when the broker refuses one of them as too large even alone: a dead
   * letter without payload (key, value and original headers dropped; error headers kept), in the same
   * transaction. Without it such a record fails the committer like any other publish error.
   */
  deadLetterTopic?: string;
  /**
   * The runs topic (`topics.runs`): each transaction that holds rows of a backfill run also writes
   * that run's cost share there (src/contracts/run-cost-share.ts). Unset: no shares are written.
   */
  runCostTopic?: string;
  /**
   * The share of the commit cadence this partition may use now: the SLO guard's lever on backfill
   * partitions, so their commits yield to online ones (docs/lanes.md, "The levers"): every
   * `commitIntervalMs ÷ s`, taken as it comes. The guard's levers table is the one home of its bound:
   * s in [0.25, 1], so commits are at most four intervals apart. A full transaction's worth,
   * `commitSoon`, `flush` and a clean close commit at once as always. Unset = 1.
   */
  commitShare?: () => number;
  /** Called after each committed transaction (records waiting for commit went down). */
  onCommitted?: () => void;
  /** Called once when a commit fails; the committer is dead afterwards (sticky error). */
  onFailure: (error: SluiceError) => void;
  /**
   * The transaction spans (docs/observability.md, "Tracing"): one per unit; a commit ends its
   * requests' spans, and records given up (failure, close) end theirs with a code. Default: off.
   */
  tracer?: PipelineTracer;
}

/**
 * Commits the outputs of one input partition with its consumer offset through a `ResultPublisher`
 * (in Kafka transactions, or at least once; src/kafka/write/result-publisher.ts). Transport-free: this
 * class owns the rules both modes share, tested with a fake publisher and a fake clock:
 * - only the contiguous completed prefix is committed (OffsetTracker);
 * - cadence: every `commitIntervalMs`, at once when a transaction's worth (records or bytes) waits,
 *   and on `commitSoon` (backpressure);
 * - slicing: each transaction takes at most `maxTransactionRecords` / `maxTransactionBytes`, cut at a
 *   record boundary so its offset covers exactly its outputs;
 * - size refusals (PUBLISH_TOO_LARGE), by the one rule of size-refusal.ts: a unit refused in a send
 *   of several records is published again, whole, in one transaction with its one offset (the
 *   publisher has halved its send bound); a record's output refused alone replaces that record's
 *   outputs by a payload-less dead letter (once), in the same transaction; a dead letter refused
 *   again, or a refused record that is no completion's output (a cost share, a dedup segment, the
 *   checkpoint), fails the committer;
 * - sticky errors: after a failed unit the committer refuses further work and reports once through
 *   `onFailure`; the owner drops in-flight work and builds a fresh committer;
 * - events: `transaction.finished` per unit and `record.outcome` per committed record.
 *
 * The publisher is made (and, with transactions, has fenced the partition's previous owner) before
 * the committer, by the committer factory in src/app/stream-processor-factory.ts.
 */
export class PartitionCommitter {
  readonly topic: string;
  readonly partition: number;
  private readonly opts: PartitionCommitterOptions;
  private readonly commitIntervalMs: number;
  private readonly maxTransactionRecords: number;
  private readonly maxTransactionBytes: number;
  private readonly tracker = new OffsetTracker<RecordCompletion>();
  private readonly publisher: ResultPublisher;
  private readonly clock: Clock;
  /** Records handed to the transaction being published (not yet committed). */
  private inTransaction = 0;
  /** Completed since the last take: an early commit starts when they would fill a transaction. */
  private completedRecords = 0;
  private completedBytes = 0;
  /** Set when commitSoon() is called while a commit runs: the running one continues with a new slice. */
  private commitRequested = false;
  private timer: unknown;
  private committing: Promise<void> | undefined;
  private failure: SluiceError | undefined;
  private closed: Promise<void> | undefined;
  /** Units riding with a later transaction (`attach`), in order. */
  private readonly attached: AttachedUnit[] = [];
  /** The consumer offset of the last committed transaction; a unit alone never commits below it. */
  private lastCommitted = 0n;

  /** Starts the commit cadence at once; `close()` stops it. */
  constructor(opts: PartitionCommitterOptions, publisher: ResultPublisher, clock: Clock) {
    this.opts = opts;
    this.topic = opts.topic;
    this.partition = opts.partition;
    this.publisher = publisher;
    this.clock = clock;
    this.commitIntervalMs = opts.commitIntervalMs;
    this.maxTransactionRecords = opts.maxTransactionRecords;
    this.maxTransactionBytes = opts.maxTransactionBytes;
    this.schedule();
  }

  /** Records tracked and not yet committed (in flight, waiting for the prefix, or being published). */
  get pendingRecords(): number {
    return this.tracker.size + this.inTransaction;
  }

  /** Registers a delivered record; offsets must increase. */
  track(offset: string): void {
    this.throwIfFailed();
    this.tracker.track(offset);
  }

  /** Records the outputs of a finished record; they go out with the next transaction. */
  complete(offset: string, completion: RecordCompletion): void {
    if (this.failure || this.closed) return;
    const bytes = completionBytes(completion);
    if (!this.tracker.complete(offset, completion, bytes)) return;
    this.completedRecords++;
    this.completedBytes += bytes;
    // A full transaction's worth is waiting: commit now instead of at the next tick, so records
    // waiting for commit (which count toward the processor's backpressure bound) drain promptly.
    const full =
      this.completedRecords >= this.maxTransactionRecords || this.completedBytes >= this.maxTransactionBytes;
    if (this.commitIntervalMs === 0) void this.commitNow();
    else if (full) this.commitSoon();
  }

  /**
   * Starts a commit of what is committable now unless one is running (which picks up newly completed
   * records before it ends). The processor calls it while backpressured, so a paused consumer does
   * not wait a whole commit interval for the records that hold it paused.
   */
  commitSoon(): void {
    if (this.failure || this.closed) return;
    // A running commit takes another slice when it ends (see commitNow) instead of queueing a run.
    if (this.committing) this.commitRequested = true;
    else void this.commitNow();
  }

  /**
   * `unit` goes out with the first transaction whose consumer offset is `unit.atOffset` or more, so it
   * is never visible without, nor after, the outputs of records from `atOffset` on; when nothing is
   * tracked, it goes alone at `atOffset` (docs/model-upgrades.md, "The boundary").
   */
  attach(unit: AttachedUnit): void {
    if (this.failure || this.closed) return;
    this.attached.push(unit);
    this.commitSoon();
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
      this.stopCadence();
      if (options.commit && !this.failure) await this.commitNow().catch(() => undefined);
      else if (this.committing) await this.committing.catch(() => undefined);
      // Whatever did not commit is given up here: the next owner reads those records again.
      abortSpans(this.tracker.completedNotTaken(), this.failure?.code ?? NOT_COMMITTED);
      await this.publisher.close();
    })();
    return this.closed;
  }

  private schedule(): void {
    if (this.commitIntervalMs === 0 || this.failure || this.closed) return;
    // Spaced by the guard's share (its levers table bounds it: at most ×4).
    const share = this.opts.commitShare?.() ?? 1;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.commitNow().finally(() => this.schedule());
    }, this.commitIntervalMs / share);
    // A pending commit tick alone must not keep the process alive (Node timers only).
    (this.timer as { unref?: () => void } | undefined)?.unref?.();
  }

  private stopCadence(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private commitNow(): Promise<void> {
    // Serialise transactions: the next one waits for the current one. Each takes a capped slice of
    // the completed prefix (cut at a record boundary, so its offset covers exactly its outputs); when
    // the cap cut it, the rest follows right after.
    const run = async (): Promise<void> => {
      this.completedRecords = 0;
      this.completedBytes = 0;
      this.commitRequested = false;
      while (!this.failure) {
        const range = this.tracker.takeCommittable({
          maxRecords: this.maxTransactionRecords,
          maxBytes: this.maxTransactionBytes,
        });
        if (!range) {
          await this.commitAttachedAlone();
          return;
        }
        this.inTransaction = range.completions.length;
        try {
          await this.commitRange(range);
        } finally {
          this.inTransaction = 0;
        }
        // Failed for good: its records are given up.
        // (the loop's guard narrowed `failure`; commitRange may have set it)
        const failure = this.failure as SluiceError | undefined;
        if (failure) abortSpans(range.completions, failure.code);
        if (!this.failure) this.opts.onCommitted?.();
        // Continue only with what was already ready when this slice was cut. Records that completed
        // during the transaction wait for the next tick: looping on them would turn the commit
        // interval into back-to-back tiny transactions (several broker round trips each), which
        // measurably raised tail latency on a shared 2-core machine.
        // A commit asked for meanwhile (backpressure, a full transaction's worth) continues too.
        if (!range.capped && !this.commitRequested) return;
        this.commitRequested = false;
      }
    };
    const previous = this.committing ?? Promise.resolve();
    const next = previous.then(run, run).finally(() => {
      if (this.committing === next) this.committing = undefined;
    });
    this.committing = next;
    return next;
  }

  /** Attached units with nothing tracked to ride with: one transaction of their own at their offset. */
  private async commitAttachedAlone(): Promise<void> {
    if (this.attached.length === 0 || this.tracker.size > 0 || this.failure) return;
    let at = this.lastCommitted;
    for (const a of this.attached) if (BigInt(a.atOffset) > at) at = BigInt(a.atOffset);
    await this.commitRange({ completions: [], offsets: [], nextOffset: at.toString(), capped: false });
    if (!this.failure) this.opts.onCommitted?.();
  }

  /**
   * Publishes a range in one transaction with its offset, by size-refusal.ts's one retry loop: after a
   * refused send of several records the whole range again (the publisher halved its send bound); a
   * completion whose output the broker refuses alone is replaced by `withoutPayload` (a dead letter
   * with its reason, no payload, its remembered id kept), once. Every consumed record still ends as
   * exactly one result, dead letter or counted duplicate, and the offset never moves past a record
   * whose outputs did not commit. The committer fails only when a replacement is refused too, or
   * when nothing may replace the refused record (no dead-letter topic; not a completion's output).
   */
  private async commitRange(range: CommittableRange<RecordCompletion>): Promise<void> {
    const deadLetterTopic = this.opts.deadLetterTopic;
    try {
      await retrySizeRefusals({
        parts: range.completions,
        recordsOf: (c) => c.outputs.length,
        write: (completions) => this.runTransaction(range.nextOffset, completions),
        onRefused: (completion, index, failure) => {
          const offset = range.offsets[index];
          if (deadLetterTopic === undefined || offset === undefined) throw failure;
          const source = { topic: this.topic, partition: this.partition, offset };
          return withoutPayload(completion, source, deadLetterTopic);
        },
      });
    } catch (error) {
      // A failure other than a size refusal has failed the committer already (with its duration).
      this.fail(asFailure(error, this.topic, this.partition), range.completions.length, 0);
    }
  }

  /**
   * Publishes one unit; throws the classified error. A size refusal is an aborted attempt (the event
   * and the span say so) for commitRange to retry; any other failure fails the committer first.
   * The records, in the order the publisher numbers them (`recordIndex`): the completions' outputs,
   * riding attached outputs, run cost shares, then the bookkeeping (dedup changelog records,
   * attached bookkeeping, the checkpoint).
   */
  private async runTransaction(nextOffset: string, completions: readonly RecordCompletion[]): Promise<void> {
    const started = this.clock.now();
    const riding = this.attached.filter((a) => BigInt(nextOffset) >= BigInt(a.atOffset));
    const changelog = this.opts.dedupChangelog?.prepare(nextOffset, completions);
    const { outputs, bookkeeping } = transactionRecords({
      topic: this.topic,
      partition: this.partition,
      nextOffset,
      completions,
      changelog: changelog?.records,
      riding,
      runCostTopic: this.opts.runCostTopic,
      offsetCheckpoint: this.opts.offsetCheckpoint,
    });
    const records = completions.length;
    const tx = (this.opts.tracer ?? NO_TRACING_TRACER).startTransaction(
      this.topic,
      this.partition,
      completions,
    );
    try {
      await this.publisher.publish({
        outputs,
        bookkeeping,
        nextOffset,
        ...(this.opts.tracer?.enabled ? { sent: () => tx.sent() } : {}),
      });
    } catch (error) {
      changelog?.aborted();
      const failure = asFailure(error, this.topic, this.partition);
      tx.abort(transactionFailure(failure), failure.code);
      if (failure.code === "PUBLISH_TOO_LARGE") {
        // Aborted and retried by commitRange; not a failure of the partition (unless it cannot be retried).
        this.opts.events.emit("transaction.finished", {
          topic: this.topic,
          partition: this.partition,
          outcome: "aborted",
          records,
          durationMs: this.clock.now() - started,
        });
      } else {
        this.fail(failure, records, this.clock.now() - started);
      }
      throw failure;
    }
    changelog?.committed();
    if (BigInt(nextOffset) > this.lastCommitted) this.lastCommitted = BigInt(nextOffset);
    for (const a of riding) {
      this.attached.splice(this.attached.indexOf(a), 1);
      a.onCommitted();
    }
    tx.commit();
    const now = this.clock.now();
    const last = completions[completions.length - 1];
    this.opts.events.emit("transaction.finished", {
      topic: this.topic,
      partition: this.partition,
      outcome: "committed",
      records,
      durationMs: now - started,
      nextOffset,
      ...(last ? { lastEventTimestampMs: last.recordTimestampMs } : {}),
    });
    for (const c of completions) {
      // Optional fields set only when present, without a spread per field: this runs per record.
      const e: SluiceEventMap["record.outcome"] = {
        topic: this.topic,
        partition: this.partition,
        outcome: c.outcome,
        endToEndMs: now - c.recordTimestampMs,
      };
      if (c.status) e.status = c.status;
      if (c.fallbackReason) e.fallbackReason = c.fallbackReason;
      if (c.errorCode) e.errorCode = c.errorCode;
      if (c.deadLetter) e.deadLetter = c.deadLetter;
      this.opts.events.emit("record.outcome", e);
    }
  }

  private fail(error: SluiceError, records: number, durationMs: number): void {
    if (this.failure) return;
    this.failure = error;
    this.stopCadence();
    this.opts.events.emit("transaction.finished", {
      topic: this.topic,
      partition: this.partition,
      outcome: error.code === "PRODUCER_FENCED" ? "fenced" : "failed",
      records,
      durationMs,
    });
    this.opts.onFailure(error);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }
}

/** A publish error as the committer's failure: a SluiceError as is, anything else INTERNAL. */
function asFailure(error: unknown, topic: string, partition: number): SluiceError {
  if (error instanceof SluiceError) return error;
  return new SluiceError("INTERNAL", `publishing ${topic}[${partition}] failed: ${String(error)}`, {
    cause: error,
  });
}

/** How a unit that failed with `error` ended: aborted (too large, retried), fenced or failed. */
function transactionFailure(error: SluiceError): "aborted" | "fenced" | "failed" {
  if (error.code === "PUBLISH_TOO_LARGE") return "aborted";
  return error.code === "PRODUCER_FENCED" ? "fenced" : "failed";
}

/** Ends the request spans of records given up without a commit. */
function abortSpans(completions: readonly RecordCompletion[], code: string): void {
  for (const c of completions) c.span?.abort(code);
}
