import type { Consumer, Kafka } from "kafkajs";
import {
  emptyModelControl,
  foldModelControl,
  lastDecision,
  type ModelControlState,
  type ModelDecision,
} from "../../contracts/model-control.js";
import { SluiceError } from "../../sluice-error.js";
import { withAdmin } from "../client/admin-session.js";
import { MODEL_CONTROL_GROUP_PREFIX } from "./model-control-store.js";

/** How often a feed whose topic does not exist yet looks for it, ms. */
export const MISSING_TOPIC_POLL_MS = 5000;

export interface ModelControlFeedOptions {
  kafka: Kafka;
  topic: string;
  groupId: string;
  /** How long `start` waits to read up to the end, ms. */
  startTimeoutMs: number;
}

/**
 * Follows the model control topic for one serve instance (docs/model-upgrades.md): a consumer of its
 * own throwaway group reads from the beginning with read_committed and never commits; `start`
 * returns once everything written before it was read, so the instance starts with the group's last
 * decision. `onDecision` hears each newer decision after that.
 */
export class ModelControlFeed {
  readonly #view: ModelControlState = emptyModelControl();
  private consumer: Consumer | undefined;
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
    const pending = new Set(ends.filter((e) => e.high > 0n).map((e) => e.partition));
    let caughtUp: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      caughtUp = resolve;
      if (pending.size === 0) resolve();
    });
    const consumer = this.opts.kafka.consumer({
      groupId: `${MODEL_CONTROL_GROUP_PREFIX}${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      sessionTimeout: 10_000,
      heartbeatInterval: 1_000,
      maxWaitTimeInMs: 100,
    });
    this.consumer = consumer;
    consumer.on(consumer.events.END_BATCH_PROCESS, (e) => {
      const end = ends.find((x) => x.partition === e.payload.partition)?.high;
      if (
        end !== undefined &&
        BigInt(e.payload.lastOffset) + 1n >= end &&
        pending.delete(e.payload.partition)
      )
        if (pending.size === 0) caughtUp();
    });
    await consumer.connect();
    await consumer.subscribe({ topic: this.opts.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ message }) => {
        foldModelControl(this.#view, this.opts.groupId, message.value);
        const last = lastDecision(this.#view);
        if (last && last.seq > this.known) {
          this.known = last.seq;
          if (pending.size === 0) this.listener?.(last);
        }
      },
    });
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
    const c = this.consumer;
    this.consumer = undefined;
    await c?.disconnect().catch(() => undefined);
  }
}
