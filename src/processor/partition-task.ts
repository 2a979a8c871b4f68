import type { Lane } from "../contracts/lane.js";
import { type OffsetOrder, offsetOrder, offsetText, orderAfter } from "../contracts/offset-order.js";
import type { TopicPartition } from "../contracts/topic-partition.js";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type { Deduplicator } from "../delivery/deduplicator.js";
import type { RecordCompletion } from "../delivery/outbound-message.js";
import { SluiceError } from "../sluice-error.js";
import type { FetchedRecord, TaskCommitter } from "./processor-ports.js";

/**
 * restoring → running → (restoring again after a reset) → revoked | closed. `revoked` and `closed`
 * are final. Every transition bumps the generation, which voids the work taken before it.
 */
export type TaskState = "restoring" | "running" | "revoked" | "closed";

const ALLOWED: Record<TaskState, readonly TaskState[]> = {
  restoring: ["restoring", "running", "revoked", "closed"],
  running: ["restoring", "revoked", "closed"],
  revoked: [],
  closed: [],
};

/** Re-seeks tolerated for a fetch that starts above the restored offset before it is believed. */
const MAX_STALE_FETCHES = 3;

export type AcceptVerdict =
  | { kind: "refused" }
  /** The fetch started before our seek: drop it (unresolved) and seek again to `offset`. */
  | { kind: "reseek"; offset: string }
  /** `records` are new (taken and tracked); anything below `nextOffset` was skipped. */
  | { kind: "accepted"; records: FetchedRecord[] };

/**
 * One owned input partition (Kafka Streams' `StreamTask`): its state, generation, committer,
 * deduplicator, offsets, stale-fetch guard and fence/reclaim bookkeeping. The processor decides what
 * to do; the task keeps the partition's facts consistent and checks its transitions.
 */
export class PartitionTask {
  readonly tp: TopicPartition;
  readonly key: string;
  readonly changelogTopic: string;
  /** Which lane the partition's topic feeds (docs/lanes.md). */
  readonly lane: Lane;
  private currentState: TaskState = "restoring";
  private gen = 0;
  private committerRef: TaskCommitter | undefined;
  private dedupRef: Deduplicator | undefined;
  /** Offsets below this were already taken (or committed); redeliveries of them are skipped. */
  private nextOffset: OffsetOrder = 0;
  /** Records taken and not yet completed (count toward maxQueuedRecords). */
  private outstandingRecords = 0;
  /**
   * Set by a restore to the offset it seeked to: until a fetch that started exactly there arrives,
   * batches fetched from an older position (queued before the seek) are ignored and the seek repeated.
   */
  private awaitingFetchFrom: OffsetOrder | undefined;
  private staleFetches = 0;
  private reclaimTimer: ReturnType<typeof setTimeout> | undefined;
  /** Fences since the last committed transaction. */
  private fenceCount = 0;

  constructor(tp: TopicPartition, changelogTopic: string, lane: Lane = "online") {
    this.tp = { topic: tp.topic, partition: tp.partition };
    this.lane = lane;
    this.key = topicPartitionKey(tp.topic, tp.partition);
    this.changelogTopic = changelogTopic;
  }

  get state(): TaskState {
    return this.currentState;
  }

  get generation(): number {
    return this.gen;
  }

  get committer(): TaskCommitter | undefined {
    return this.committerRef;
  }

  get dedup(): Deduplicator | undefined {
    return this.dedupRef;
  }

  get running(): boolean {
    return this.currentState === "running";
  }

  get fences(): number {
    return this.fenceCount;
  }

  /** Offsets below this were taken already (or committed): where a model switch's boundary goes. */
  get takenOffset(): string {
    return offsetText(this.nextOffset);
  }

  /** Records taken and not yet committed: queued, inferring, or waiting for their transaction. */
  get pendingRecords(): number {
    return Math.max(this.outstandingRecords, this.committerRef?.pendingRecords ?? 0);
  }

  /** True while work taken at `generation` still counts: nothing voided it and the task runs. */
  isCurrent(generation: number): boolean {
    return generation === this.gen && this.currentState === "running";
  }

  /** True while a restore started at `generation` may still install its results. */
  isRestoring(generation: number): boolean {
    return generation === this.gen && this.currentState === "restoring";
  }

  /** Installs the committer a restore initialised (restoring only; the task owns it from now on). */
  installCommitter(committer: TaskCommitter): void {
    this.expect("restoring", "install a committer");
    this.committerRef = committer;
  }

  /** Takes the committer back out (a failed restore closes it). */
  takeCommitter(): TaskCommitter | undefined {
    const c = this.committerRef;
    this.committerRef = undefined;
    return c;
  }

  /** The restore is done: run from `offset` with `dedup`. */
  start(dedup: Deduplicator, offset: string): void {
    this.expect("restoring", "start");
    if (!this.committerRef)
      throw new SluiceError("INTERNAL", `task ${this.describe()} started without a committer`);
    this.dedupRef = dedup;
    this.nextOffset = offsetOrder(offset);
    this.awaitingFetchFrom = this.nextOffset;
    this.staleFetches = 0;
    this.transition("running");
  }

  /**
   * Takes fetched records (offset order; `fetchedOffset` is where the fetch started). Records below
   * what was already taken are skipped (kafkajs re-fetches from the committed offset after a rejoin);
   * new ones are tracked by the committer and counted as outstanding.
   */
  accept(records: readonly FetchedRecord[], fetchedOffset: string): AcceptVerdict {
    if (!this.running || !this.committerRef || !this.dedupRef) return { kind: "refused" };
    if (this.awaitingFetchFrom !== undefined) {
      // A fetch that started above the restored offset is either stale (queued before our seek;
      // accepting it would skip records) or kafkajs stepped over transaction markers at that offset by
      // itself. Re-seek a few times to rule out the first; then it is the second.
      if (offsetOrder(fetchedOffset) > this.awaitingFetchFrom && this.staleFetches < MAX_STALE_FETCHES) {
        this.staleFetches++;
        return { kind: "reseek", offset: offsetText(this.awaitingFetchFrom) };
      }
      this.awaitingFetchFrom = undefined;
    }
    const taken: FetchedRecord[] = [];
    for (const r of records) {
      const offset = offsetOrder(r.offset);
      if (offset < this.nextOffset) continue;
      this.nextOffset = orderAfter(offset);
      this.committerRef.track(r.offset);
      this.outstandingRecords++;
      taken.push(r);
    }
    return { kind: "accepted", records: taken };
  }

  /** Hands a finished record to the committer; false (and nothing done) when the work is void. */
  complete(generation: number, offset: string, completion: RecordCompletion): boolean {
    if (generation !== this.gen || !this.committerRef) return false;
    this.committerRef.complete(offset, completion);
    this.outstandingRecords--;
    return true;
  }

  /** A transaction committed: the fence streak ends. */
  committed(): void {
    this.fenceCount = 0;
  }

  /**
   * Reclaims the task after it was fenced. Someone initialised our transactional id, which a member
   * only does after being assigned the partition: our membership may be stale and a rebalance on its
   * way, and reclaiming at once could fence the rightful owner in turn. So wait a few heartbeats
   * (jittered): a stale member learns of the rebalance at its next heartbeat, after which
   * `isRebalancing` holds the reclaim back until the assignment decides (the owner cancels this timer
   * and reclaims if the assignment still lists us), so the two cannot fence each other in turn
   * (docs/exactly-once.md, "Reclaiming after a fence"). Repeated fences without a commit in between
   * wait a full session timeout.
   */
  reclaimAfterFence(
    timing: { heartbeatIntervalMs: number; sessionTimeoutMs: number },
    isRebalancing: () => boolean,
    reclaim: () => void,
  ): void {
    const fences = ++this.fenceCount;
    const attempt = () => {
      // Still rebalancing: look again in a heartbeat in case it ends without touching us.
      if (isRebalancing()) this.scheduleReclaim(timing.heartbeatIntervalMs, attempt);
      else reclaim();
    };
    this.scheduleReclaim(
      fencedReclaimDelayMs(fences, timing.heartbeatIntervalMs, timing.sessionTimeoutMs),
      attempt,
    );
  }

  /**
   * Voids in-flight work and goes back to restoring (after a failed or fenced transaction). The old
   * committer is closed without committing; the caller schedules the reclaim.
   */
  reset(): void {
    this.transition("restoring");
    this.outstandingRecords = 0;
    this.cancelReclaim();
    void this.takeCommitter()?.close({ commit: false });
  }

  /** The group took the partition away: commit what is complete, give the producer back. */
  revoke(): void {
    this.transition("revoked");
    this.outstandingRecords = 0;
    this.cancelReclaim();
    void this.takeCommitter()?.close({ commit: true });
  }

  /** Clean shutdown: a running task commits what is complete; a restoring one leaves all to the next owner. */
  async closeClean(): Promise<void> {
    const commit = this.running;
    this.transition("closed");
    this.cancelReclaim();
    await this.takeCommitter()?.close({ commit });
  }

  /** Dirty close: nothing more is committed (the next owner redoes what was not). */
  async closeDirty(): Promise<void> {
    this.transition("closed");
    this.cancelReclaim();
    await this.takeCommitter()?.close({ commit: false });
  }

  /** Runs `fn` after `delayMs` unless cancelled or replaced (one pending reclaim per task). */
  scheduleReclaim(delayMs: number, fn: () => void): void {
    this.cancelReclaim();
    this.reclaimTimer = setTimeout(() => {
      this.reclaimTimer = undefined;
      fn();
    }, delayMs);
    this.reclaimTimer.unref?.();
  }

  /** Cancels a pending reclaim; true when one was pending. */
  cancelReclaim(): boolean {
    if (!this.reclaimTimer) return false;
    clearTimeout(this.reclaimTimer);
    this.reclaimTimer = undefined;
    return true;
  }

  describe(): string {
    return `${this.tp.topic}[${this.tp.partition}]`;
  }

  private transition(to: TaskState): void {
    if (!ALLOWED[this.currentState].includes(to)) {
      throw new SluiceError(
        "INTERNAL",
        `task ${this.describe()}: illegal transition ${this.currentState} → ${to}; this is a bug in Sluice`,
      );
    }
    this.currentState = to;
    this.gen++;
  }

  private expect(state: TaskState, doing: string): void {
    if (this.currentState !== state) {
      throw new SluiceError(
        "INTERNAL",
        `task ${this.describe()} cannot ${doing} while ${this.currentState}; this is a bug in Sluice`,
      );
    }
  }
}

/**
 * Wait before reclaiming a fenced partition still assigned to us, ms: two heartbeats plus 500 ms plus
 * up to one heartbeat of jitter (capped at the session timeout); after more than 2 fences without a
 * commit, a full session timeout.
 */
export function fencedReclaimDelayMs(
  fences: number,
  heartbeatIntervalMs: number,
  sessionTimeoutMs: number,
  random: () => number = Math.random,
): number {
  if (fences > 2) return sessionTimeoutMs;
  const base = 2 * heartbeatIntervalMs + 500;
  return Math.min(sessionTimeoutMs, base + Math.floor(random() * heartbeatIntervalMs));
}
