import type { Lane } from "../contracts/lane.js";
import type { TopicPartition } from "../contracts/topic-partition.js";
import type { SluiceEvents } from "../events/sluice-events.js";
import { LaneBackpressure, type LaneCounts } from "./lane-backpressure.js";
import type { SwitchPartitions } from "./model-router.js";
import type { PartitionTask } from "./partition-task.js";
import type { RecordSource } from "./processor-ports.js";
import type { ProcessorLog } from "./stream-processor-options.js";

/** What flow control sees of the processor (docs/design.md §6.17: a minimal context, not the owner). */
export interface LaneFlowContext {
  source: Pick<RecordSource, "pause" | "resume">;
  events: SluiceEvents;
  log: ProcessorLog;
  /** The tasks of the partitions the processor owns now. */
  tasks(): Iterable<PartitionTask>;
  isStopping(): boolean;
}

/**
 * Which lanes' partitions fetch: pauses and resumes them when the records taken and not yet
 * committed reach the queue bound (`LaneBackpressure`, docs/processor.md "Backpressure") and when the
 * SLO guard holds the backfill fetches (its `fetchPaused` lever, docs/lanes.md). A pause or resume
 * the consumer refuses is logged, never thrown into the caller.
 */
export class LaneFlowControl {
  private readonly backpressure: LaneBackpressure;

  constructor(
    private readonly ctx: LaneFlowContext,
    maxQueuedRecords: number,
    hasBackfill: boolean,
  ) {
    this.backpressure = new LaneBackpressure(maxQueuedRecords, hasBackfill);
  }

  /**
   * A partition that was held (restoring, or a writer schema not yet fetched) fetches again, unless
   * its lane is paused, the processor stops, or `hold` (a model switch holds an online partition
   * until its member has the decided version).
   */
  resumeUnlessHeld(tp: TopicPartition, lane: Lane, hold: boolean): void {
    if (!hold && !this.pausesLane(lane) && !this.ctx.isStopping()) this.resume([tp]);
  }

  /** The pause and resume a model switch uses on online partitions (`ModelRouter.bind`). */
  switchPartitions(): SwitchPartitions {
    return {
      running: () => [...this.ctx.tasks()].filter((t) => t.running && t.lane === "online"),
      pause: (tp) => this.pause([tp]),
      resume: (tp) => {
        if (!this.pausesLane("online") && !this.ctx.isStopping()) this.resume([tp]);
      },
    };
  }

  /** `lane`'s partitions are paused (by the queue bound or, for backfill, by the guard). */
  pausesLane(lane: Lane): boolean {
    return this.backpressure.pausesLane(lane);
  }

  /** The queue bound (not the guard) pauses `lane`: its records in flight count against the bound. */
  boundPauses(lane: Lane): boolean {
    return this.backpressure.boundPauses(lane);
  }

  /** Records were taken: pauses the lanes that reached the bound, and has their completed records commit now. */
  afterTaken(): void {
    const pause = this.backpressure.onQueued(this.queuedRecords());
    if (pause.length === 0) return;
    this.pause(this.runningPartitions(pause));
    // Completed records waiting for their transaction count toward the bound: commit them now.
    for (const t of this.ctx.tasks()) if (t.running && pause.includes(t.lane)) t.committer?.commitSoon();
    this.ctx.events.emit("consumer.paused", { reason: this.backpressure.reason(pause), lanes: pause });
  }

  /**
   * A record of `task` completed. A paused lane drains faster when its completed records commit now;
   * only that lane's partitions, so a backfill paused at its share does not turn every online
   * completion into a transaction.
   */
  afterCompleted(task: PartitionTask): void {
    if (this.backpressure.boundPauses(task.lane)) task.committer?.commitSoon();
    this.afterDrained();
  }

  /** Records completed, committed or were dropped: resumes the lanes whose queue drained enough. */
  afterDrained(): void {
    if (!this.backpressure.paused || this.ctx.isStopping()) return;
    const resume = this.backpressure.onDrained(this.queuedRecords());
    if (resume.length === 0) return;
    this.resume(this.runningPartitions(resume));
    this.ctx.events.emit("consumer.resumed", { lanes: resume });
  }

  /** The SLO guard's `fetchPaused` lever: holds (or lets go of) the backfill lane's fetches. */
  holdBackfill(paused: boolean): void {
    if (this.ctx.isStopping()) return;
    const change = this.backpressure.holdBackfill(paused);
    if (change === "pause") {
      this.pause(this.runningPartitions(["backfill"]));
      this.ctx.events.emit("consumer.paused", {
        reason: "SLO guard: online tail above target",
        lanes: ["backfill"],
      });
    } else if (change === "resume") {
      this.resume(this.runningPartitions(["backfill"]));
      this.ctx.events.emit("consumer.resumed", { lanes: ["backfill"] });
    }
  }

  pause(tps: TopicPartition[]): void {
    try {
      this.ctx.source.pause(tps);
    } catch (error) {
      // Before the first join kafkajs has no group to pause in; onRecords refuses records instead.
      this.ctx.log.warn({ err: String(error) }, "pausing partitions failed");
    }
  }

  resume(tps: TopicPartition[]): void {
    try {
      this.ctx.source.resume(tps);
    } catch (error) {
      // Only when the consumer is not running (stopping or crashed); never let it break completion.
      this.ctx.log.warn({ err: String(error) }, "resuming partitions failed");
    }
  }

  /**
   * Records taken from Kafka and not yet committed: in the batcher, inferring, or completed and
   * waiting for their transaction. Counting the last kind bounds memory when commits lag behind
   * a fast model (a long commitIntervalMs, a slow broker).
   */
  private queuedRecords(): LaneCounts {
    const n: LaneCounts = { online: 0, backfill: 0 };
    for (const t of this.ctx.tasks()) n[t.lane] += t.pendingRecords;
    return n;
  }

  private runningPartitions(lanes: readonly Lane[]): TopicPartition[] {
    return [...this.ctx.tasks()].filter((t) => t.running && lanes.includes(t.lane)).map((t) => t.tp);
  }
}
