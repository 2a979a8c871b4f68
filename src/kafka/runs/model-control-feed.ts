import { setTimeout as sleep } from "node:timers/promises";
import type { Kafka, KafkaMessage } from "kafkajs";
import {
  emptyModelControl,
  foldModelControl,
  lastDecision,
  type ModelControlState,
  type ModelDecision,
} from "../../contracts/model-control.js";
import { isAccessFailure, SluiceError } from "../../sluice-error.js";
import { withAdmin } from "../client/admin-session.js";
import { type BoundedRange, readBounded } from "../read/bounded-reader.js";

/** How often a feed whose topic does not exist yet looks for it, ms. */
export const MISSING_TOPIC_POLL_MS = 5000;
/** How long a feed waits before it reads on after its read failed (past the reader's retries), ms. */
const FOLLOW_RETRY_MS = 1000;

export interface ModelControlFeedOptions {
  kafka: Kafka;
  topic: string;
  groupId: string;
  /** How long `start` waits to read up to the end, ms. */
  startTimeoutMs: number;
  /**
   * A failed read after the start. `retrying`: the feed reads on from where it was a second later
   * (a broker restart, a lost leader); false for an access failure (a refused ACL, a bad credential),
   * which retrying cannot fix: the feed stops following.
   */
  onFollowError?(error: unknown, retrying: boolean): void;
}

/**
 * Follows the model control topic for one serve instance (docs/model-upgrades.md): a group-less read
 * (`readBounded` without an end) from the beginning with read_committed; `start` returns once
 * everything written before it was read, so the instance starts with the group's last decision.
 * `onDecision` hears each newer decision after that. A read that fails after the start (past the
 * reader's own retries) is reported to `onFollowError` and goes on from where it was a second later;
 * an access failure is reported once and ends the following (retrying cannot fix it).
 */
export class ModelControlFeed {
  readonly #view: ModelControlState = emptyModelControl();
  /** Ends the read that follows the topic, and that read. */
  private abort: AbortController | undefined;
  private following: Promise<void> | undefined;
  private listener: ((d: ModelDecision) => void) | undefined;
  private known = 0;
  private waitTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: ModelControlFeedOptions) {}

  /** The group's last decision read so far; undefined = it never decided. */
  decision(): ModelDecision | undefined {
    return lastDecision(this.#view);
  }

  /** Everything read so far (decisions and boundaries of the group); a live view, not a copy. */
  state(): Readonly<ModelControlState> {
    return this.#view;
  }

  onDecision(listener: (d: ModelDecision) => void): void {
    this.listener = listener;
  }

  /**
   * Reads the topic to its end. A topic that does not exist yet holds no decision: the feed starts
   * empty and looks for the topic every `MISSING_TOPIC_POLL_MS` (the first `promote` creates it), then
   * follows it from the beginning, so no decision is missed.
   */
  async start(late = false): Promise<void> {
    const ends = await withAdmin(this.opts.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(this.opts.topic)) return null;
      return (await admin.fetchTopicOffsets(this.opts.topic)).map((o) => ({
        partition: o.partition,
        high: BigInt(o.high),
      }));
    });
    if (ends === null) {
      this.waitForTopic();
      return;
    }
    await this.follow(ends);
    // Started after serve did (the topic appeared): what it read is news to the running partitions.
    const last = this.decision();
    if (late && last) this.listener?.(last);
  }

  private waitForTopic(): void {
    this.waitTimer = setTimeout(() => {
      this.waitTimer = undefined;
      if (this.stopped) return;
      void this.start(true).catch(() => this.waitForTopic());
    }, MISSING_TOPIC_POLL_MS);
    this.waitTimer.unref?.();
  }

  private async follow(ends: { partition: number; high: bigint }[]): Promise<void> {
    const endOf = new Map(ends.map((e) => [e.partition, e.high]));
    const pending = new Set(ends.filter((e) => e.high > 0n).map((e) => e.partition));
    /** Where each partition's read goes on from (after a failure, the read starts again there). */
    const next = new Map(ends.map((e) => [e.partition, 0n]));
    let caughtUp: () => void = () => {};
    let failed: (error: unknown) => void = () => {};
    const ready = new Promise<void>((resolve, reject) => {
      caughtUp = resolve;
      failed = reject;
      if (pending.size === 0) resolve();
    });
    ready.catch(() => {});
    const onBatch = (range: BoundedRange, messages: readonly KafkaMessage[], lastOffset: bigint) => {
      for (const message of messages) {
        foldModelControl(this.#view, this.opts.groupId, message.value);
        const last = lastDecision(this.#view);
        if (last && last.seq > this.known) {
          this.known = last.seq;
          if (pending.size === 0) this.listener?.(last);
        }
      }
      next.set(range.partition, lastOffset + 1n);
      const end = endOf.get(range.partition);
      if (
        end !== undefined &&
        lastOffset + 1n >= end &&
        pending.delete(range.partition) &&
        pending.size === 0
      )
        caughtUp();
      return undefined; // never done: the feed follows until stop()
    };
    const doing = `following the model control topic ${this.opts.topic} (topics.modelControl)`;
    const read = async () => {
      while (!this.stopped) {
        const abort = new AbortController();
        this.abort = abort;
        try {
          await readBounded({
            kafka: this.opts.kafka,
            ranges: [...next].map(([partition, from]) => ({
              topic: this.opts.topic,
              partition,
              fromOffset: from.toString(),
            })),
            order: "parallel",
            doing,
            signal: abort.signal,
            onBatch,
          });
          return; // stopped
        } catch (error) {
          if (pending.size > 0) return failed(error);
          if (this.stopped) return;
          if (isAccessFailure(error)) return this.opts.onFollowError?.(error, false);
          // Past the reader's own retries (a broker restart, a lost leader): follow on from where it was.
          this.opts.onFollowError?.(error, true);
          await sleep(FOLLOW_RETRY_MS);
        }
      }
    };
    this.following = read();
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new SluiceError(
                  "BROKER_UNAVAILABLE",
                  `could not read the model control topic ${this.opts.topic} (topics.modelControl) to its end within ${this.opts.startTimeoutMs} ms; check the broker`,
                  { retriable: true, context: { topic: this.opts.topic } },
                ),
              ),
            this.opts.startTimeoutMs,
          );
        }),
      ]);
    } catch (error) {
      await this.stop();
      throw error;
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.waitTimer) clearTimeout(this.waitTimer);
    this.abort?.abort();
    await this.following?.catch(() => undefined);
  }
}
