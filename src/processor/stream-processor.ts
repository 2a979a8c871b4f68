import type { Admin, KafkaMessage } from "kafkajs";
import { type MicroBatch, MicroBatcher } from "../batching/micro-batcher.js";
import type { RecordHeaders } from "../contracts/codec.js";
import type { InferenceRequest } from "../contracts/inference.js";
import { RequestDecoder } from "../contracts/request-codec.js";
import { ResultEncoder } from "../contracts/result-codec.js";
import { ChangelogRestorer, type RestoredPartition } from "../delivery/changelog-restorer.js";
import { buildDeadLetter, type DeadLetterSource, type DeadLetterStage } from "../delivery/dead-letter.js";
import { type ChangelogEntry, Deduplicator } from "../delivery/deduplicator.js";
import {
  expiredOutcome,
  type ResultContext,
  type ResultOutcome,
  routeOutcome,
} from "../delivery/result-builder.js";
import { MAX_SEND_BYTES } from "../delivery/result-publisher.js";
import { fixAbortedTransactionOrder } from "../kafka/aborted-transaction-order.js";
import { ConsumerLoop, type TopicPartition } from "../kafka/consumer-loop.js";
import {
  type OutboundMessage,
  PartitionCommitter,
  type RecordCompletion,
} from "../kafka/partition-committer.js";
import { changelogTopicFor } from "../kafka/topic-admin.js";
import type { ItemOutcome } from "../model/model-port.js";
import type { SluiceEventMap, SluiceEventName } from "../observability/sluice-events.js";
import { SluiceError } from "../sluice-error.js";
import {
  type ResolvedProcessorOptions,
  resolveProcessorOptions,
  type StreamProcessorOptions,
} from "./stream-processor-options.js";

/** State of one assigned input partition. `generation` changes whenever its in-flight work is void. */
interface PartitionState {
  tp: TopicPartition;
  key: string;
  changelogTopic: string;
  generation: number;
  phase: "restoring" | "ready" | "revoked";
  committer: PartitionCommitter | undefined;
  dedup: Deduplicator | undefined;
  /** Offsets below this were already taken (or committed); redeliveries of them are skipped. */
  nextOffset: bigint;
  /** Records taken and not yet completed (counts toward maxQueuedRecords). */
  outstanding: number;
  /**
   * Set by a restore to the offset it seeked to: until a fetch that started exactly there arrives,
   * batches fetched from an older position (queued before the seek) are ignored and the seek repeated.
   */
  awaitingFetchFrom: bigint | undefined;
  staleFetches: number;
  /** Set after fencing: reclaim at the next assignment that still lists us, or when this fires. */
  reclaimTimer: NodeJS.Timeout | undefined;
  /** Fences since the last committed transaction; past 2 the reclaim waits a full session timeout. */
  fences: number;
}

interface WorkItem {
  state: PartitionState;
  generation: number;
  source: DeadLetterSource;
  timestampMs: number;
  request: InferenceRequest;
  changelog: ChangelogEntry[];
  deadlineMs: number;
  enqueuedAtMs: number;
}

export interface ProcessorReadiness {
  ready: boolean;
  reason?: string;
}

/**
 * The online pipeline: ConsumerLoop → RequestDecoder → Deduplicator → MicroBatcher → ModelPort →
 * PartitionCommitter. See docs/processor.md for the flow and docs/exactly-once.md for why every
 * consumed record ends as exactly one of result, dead letter or counted duplicate.
 *
 * Recovery tiers (DESIGN.md §6.4): a fenced or failed transaction voids the partition's in-flight
 * work (its generation changes) and the partition is reclaimed exactly like a fresh assignment
 * (init producer → committed offset → restore dedup → seek → resume); a consumer crash kafkajs does
 * not recover from is fatal and reported through `onFatal`.
 */
export class StreamProcessor {
  private readonly o: ResolvedProcessorOptions;
  private readonly decoder: RequestDecoder;
  private readonly encoder: ResultEncoder;
  private readonly restorer: ChangelogRestorer;
  private readonly batcher: MicroBatcher<WorkItem>;
  private readonly loop: ConsumerLoop;
  private readonly states = new Map<string, PartitionState>();
  private readonly waitingBatches: MicroBatch<WorkItem>[] = [];
  private admin: Admin | undefined;
  private inFlightBatches = 0;
  private backpressured = false;
  private started = false;
  private stopping = false;
  private closing: Promise<void> | undefined;
  private idleWaiters: (() => void)[] = [];
  private inferenceEstimateMs = 0;
  private fatalHandler: ((error: SluiceError) => void) | undefined;
  private readonly restores = new Set<Promise<void>>();
  /**
   * Per partition key, the last producer initialisation of this process (settled = done, and closed if
   * it was stale). A restore waits for it before initialising its own, so a late initialisation of an
   * older restore can never fence a newer owner in this same process.
   */
  private readonly producerInits = new Map<string, Promise<void>>();
  /** Between REBALANCING and the next assignment: a fenced partition's reclaim waits for the assignment. */
  private rebalancing = false;

  constructor(options: StreamProcessorOptions) {
    this.o = resolveProcessorOptions(options);
    // read_committed must really skip aborted records: input, and the changelog written by fenced owners.
    fixAbortedTransactionOrder();
    this.decoder = new RequestDecoder({
      defaultCodec: this.o.requestCodec,
      maxMessageBytes: this.o.maxMessageBytes,
    });
    this.encoder = new ResultEncoder({ codec: this.o.resultCodec });
    this.restorer = new ChangelogRestorer({ kafka: this.o.kafka, timeoutMs: this.o.restoreTimeoutMs });
    this.batcher = new MicroBatcher<WorkItem>({
      maxBatchSize: this.o.maxBatchSize,
      maxBatchTokens: this.o.maxBatchTokens,
      maxWaitMs: this.o.maxWaitMs,
      onBatch: (batch) => this.onBatch(batch),
    });
    this.loop = new ConsumerLoop(
      {
        kafka: this.o.kafka,
        groupId: this.o.groupId,
        topics: this.o.requestTopics,
        sessionTimeoutMs: this.o.sessionTimeoutMs,
        heartbeatIntervalMs: this.o.heartbeatIntervalMs,
        maxBytesPerPartition: this.o.maxBytesPerPartition,
      },
      {
        onAssigned: (assignment) => this.onAssigned(assignment),
        onRebalancing: () => this.onRebalancing(),
        onRecords: (topic, partition, messages, fetchedOffset) =>
          this.onRecords(topic, partition, messages, fetchedOffset),
        onFatal: (error) => this.fatal(error),
      },
    );
  }

  /** Called once if the processor cannot continue (the consumer died for good). */
  onFatal(handler: (error: SluiceError) => void): void {
    this.fatalHandler = handler;
  }

  async start(): Promise<void> {
    if (this.started) throw new SluiceError("INTERNAL", "StreamProcessor.start() called twice");
    this.started = true;
    this.admin = this.o.kafka.admin();
    await this.admin.connect();
    await this.loop.start();
    this.o.log.info(
      {
        groupId: this.o.groupId,
        topics: this.o.requestTopics,
        model: this.o.model.identity,
        delivery: this.o.transactions ? "transactions" : "at-least-once",
      },
      "stream processor started",
    );
  }

  /** Ready = started, not stopping, has partitions and all of them are restored. */
  readiness(): ProcessorReadiness {
    if (!this.started || this.stopping)
      return { ready: false, reason: this.stopping ? "stopping" : "not started" };
    if (this.states.size === 0) return { ready: false, reason: "no partitions assigned" };
    const restoring = [...this.states.values()].filter((s) => s.phase !== "ready").map((s) => s.key);
    if (restoring.length > 0) return { ready: false, reason: `restoring ${restoring.join(", ")}` };
    return { ready: true };
  }

  /** Currently assigned partitions and their phase (for status output and tests). */
  assignment(): { topic: string; partition: number; phase: string }[] {
    return [...this.states.values()].map((s) => ({ ...s.tp, phase: s.phase }));
  }

  /**
   * Graceful stop: stop fetching, flush the batcher, finish in-flight batches, commit, leave the
   * group. Safe to call twice (both calls share one promise).
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.stopping = true;
    for (const s of this.states.values()) if (s.reclaimTimer) clearTimeout(s.reclaimTimer);
    const assigned = [...this.states.values()].map((s) => s.tp);
    try {
      this.loop.pause(assigned);
    } catch {
      // consumer not running (never started or already crashed)
    }
    this.batcher.close();
    await this.whenIdle();
    // Restores in progress see `stopping` and give their producers back; wait so none is left open.
    await Promise.all([...this.restores]);
    await Promise.all(
      [...this.states.values()].map(async (s) => {
        if (s.phase === "ready" && s.committer) await s.committer.close({ commit: true });
        else await s.committer?.close({ commit: false });
      }),
    );
    await this.loop.close();
    await this.admin?.disconnect().catch(() => undefined);
    this.o.log.info({}, "stream processor stopped");
  }

  // ── assignment, restore, revoke ────────────────────────────────────────────────────────────────

  private onAssigned(assignment: TopicPartition[]): void {
    this.rebalancing = false;
    if (this.stopping) return; // shutdown commits and closes what we hold; take nothing new
    const keys = new Set(assignment.map(keyOf));
    const revoked: PartitionState[] = [];
    for (const state of this.states.values()) if (!keys.has(state.key)) revoked.push(state);
    for (const state of revoked) this.revoke(state);
    const fresh: PartitionState[] = [];
    const reclaim: PartitionState[] = [];
    for (const tp of assignment) {
      const kept = this.states.get(keyOf(tp));
      if (kept?.reclaimTimer) {
        // Fenced earlier and the group still gives it to us: reclaim it now.
        clearTimeout(kept.reclaimTimer);
        kept.reclaimTimer = undefined;
        reclaim.push(kept);
      }
      if (kept) continue;
      const state: PartitionState = {
        tp,
        key: keyOf(tp),
        changelogTopic: changelogTopicFor(this.o.dedupChangelogBase, this.o.groupId, tp.topic),
        generation: 0,
        phase: "restoring",
        committer: undefined,
        dedup: undefined,
        nextOffset: 0n,
        outstanding: 0,
        awaitingFetchFrom: undefined,
        staleFetches: 0,
        reclaimTimer: undefined,
        fences: 0,
      };
      this.states.set(state.key, state);
      fresh.push(state);
    }
    emitByTopic(
      revoked.map((s) => s.tp),
      (topic, partitions) => this.emit("partitions.revoked", { topic, partitions }),
    );
    emitByTopic(
      fresh.map((s) => s.tp),
      (topic, partitions) => this.emit("partitions.assigned", { topic, partitions }),
    );
    if (fresh.length > 0) this.safePause(fresh.map((s) => s.tp));
    // The dedup budget is per instance: re-split it over what we own now.
    const perPartition = this.dedupEntriesPerPartition();
    for (const s of this.states.values()) s.dedup?.setMaxEntries(perPartition);
    if (fresh.length + reclaim.length > 0) this.startRestore([...fresh, ...reclaim]);
  }

  /**
   * `dedupMaxEntries` is a per-instance budget: each assigned partition gets an equal share, rounded
   * down, at least 1 (docs/exactly-once.md). Recomputed on every assignment.
   */
  private dedupEntriesPerPartition(): number {
    return Math.max(1, Math.floor(this.o.dedupMaxEntries / Math.max(1, this.states.size)));
  }

  private onRebalancing(): void {
    this.rebalancing = true;
    // Commit what is complete before partitions move; a new owner then re-does less work. Safe even
    // if the commit races the new owner: it either lands before the new owner fences us (and reads
    // offsets) or fails as fenced.
    for (const s of this.states.values())
      if (s.phase === "ready") void s.committer?.flush().catch(() => undefined);
  }

  private revoke(state: PartitionState): void {
    if (state.reclaimTimer) clearTimeout(state.reclaimTimer);
    state.reclaimTimer = undefined;
    state.phase = "revoked";
    state.generation++;
    state.outstanding = 0;
    this.states.delete(state.key);
    this.batcher.drop((item) => item.state === state);
    void state.committer?.close({ commit: true });
    this.maybeResume();
  }

  /** Voids in-flight work of a partition and reclaims it from its committed offset. */
  private reset(state: PartitionState, error: SluiceError): void {
    if (this.stopping || state.phase === "revoked") return;
    this.o.log.warn(
      { topic: state.tp.topic, partition: state.tp.partition, code: error.code, err: error.message },
      "partition reset: dropping in-flight work and reclaiming from the committed offset",
    );
    state.phase = "restoring";
    state.generation++;
    state.outstanding = 0;
    this.batcher.drop((item) => item.state === state);
    this.safePause([state.tp]);
    const old = state.committer;
    state.committer = undefined;
    const generation = state.generation;
    const reclaim = () => {
      state.reclaimTimer = undefined;
      if (state.generation === generation && state.phase === "restoring" && !this.stopping)
        this.startRestore([state]);
    };
    void old?.close({ commit: false });
    if (error.code === "PRODUCER_FENCED") {
      // Someone initialised our transactional id, which a member only does after being assigned the
      // partition: our membership may be stale and a rebalance on its way. Reclaiming at once could
      // fence the rightful owner in turn, so wait for the next assignment (onAssigned reclaims or
      // revokes). Without one, reclaim after a few heartbeats (jittered): a stale member learns of the
      // rebalance at its next heartbeat, after which `rebalancing` holds the reclaim back until the
      // assignment, so the two cannot fence each other in turn (docs/exactly-once.md, "Reclaiming after a fence").
      // After repeated fences without a commit in between, wait a full session timeout.
      state.fences++;
      const reclaimAfterFence = () => {
        if (this.rebalancing) {
          // The assignment decides (onAssigned reclaims it if it still lists us, which needs the
          // timer set); look again in a heartbeat in case the rebalance ends without touching us.
          state.reclaimTimer = setTimeout(reclaimAfterFence, this.o.heartbeatIntervalMs);
          state.reclaimTimer.unref?.();
          return;
        }
        reclaim();
      };
      state.reclaimTimer = setTimeout(reclaimAfterFence, this.fencedReclaimDelayMs(state.fences));
      state.reclaimTimer.unref?.();
    } else {
      reclaim();
    }
    this.maybeResume();
  }

  /** Wait before reclaiming a fenced partition still assigned to us, ms. */
  private fencedReclaimDelayMs(fences: number): number {
    if (fences > 2) return this.o.sessionTimeoutMs;
    const base = 2 * this.o.heartbeatIntervalMs + 500;
    return Math.min(this.o.sessionTimeoutMs, base + Math.floor(Math.random() * this.o.heartbeatIntervalMs));
  }

  /**
   * Order matters (docs/exactly-once.md): 1. init the partition's transactional producer, which
   * fences the previous owner and completes its open transaction; 2. only then read the committed
   * offset and the changelog, which can no longer change behind our back; 3. seek and resume.
   */
  private async restore(states: PartitionState[]): Promise<void> {
    const started = Date.now();
    const generations = new Map(states.map((s) => [s, s.generation]));
    const current = () =>
      states.filter((s) => s.phase === "restoring" && s.generation === generations.get(s));
    const stale = (s: PartitionState) =>
      s.generation !== generations.get(s) || s.phase !== "restoring" || this.stopping;
    try {
      // allSettled: every initialisation finishes (and a stale one gives its producer back) before
      // the failure path closes what was installed, so none is left behind or installs itself late.
      const inits = await Promise.allSettled(
        states.map((s) => {
          const previous = this.producerInits.get(s.key) ?? Promise.resolve();
          const init = previous.then(() => this.initCommitter(s, stale));
          const settled = init.then(
            () => undefined,
            () => undefined,
          );
          this.producerInits.set(s.key, settled);
          void settled.then(() => {
            if (this.producerInits.get(s.key) === settled) this.producerInits.delete(s.key);
          });
          return init;
        }),
      );
      const failed = inits.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
      const live = current();
      if (live.length === 0) return;
      const offsets = await this.committedOffsets(live.map((s) => s.tp));
      const byChangelog = new Map<string, PartitionState[]>();
      for (const s of live) {
        const list = byChangelog.get(s.changelogTopic) ?? [];
        list.push(s);
        byChangelog.set(s.changelogTopic, list);
      }
      const restored = new Map<PartitionState, RestoredPartition>();
      for (const [topic, list] of byChangelog) {
        const entries = await this.restorer.restore(
          topic,
          list.map((s) => s.tp.partition),
        );
        for (const s of list) {
          restored.set(s, entries.get(s.tp.partition) ?? { entries: [], nextOffset: undefined });
        }
      }
      for (const s of current()) {
        const dedup = new Deduplicator({
          ttlMs: this.o.dedupTtlMs,
          maxEntries: this.dedupEntriesPerPartition(),
        });
        const changelog = restored.get(s);
        const stats = dedup.restore(changelog?.entries ?? [], Date.now());
        // The changelog checkpoint is the stable truth after the fence; the group's committed offset
        // may still lag behind it (no require_stable in kafkajs, see changelog-restorer.ts).
        const groupOffset = offsets.get(s.key) as string;
        const checkpoint = changelog?.nextOffset;
        const offset =
          checkpoint !== undefined && BigInt(checkpoint) > BigInt(groupOffset) ? checkpoint : groupOffset;
        s.dedup = dedup;
        s.nextOffset = BigInt(offset);
        s.awaitingFetchFrom = BigInt(offset);
        s.staleFetches = 0;
        this.loop.seek(s.tp, offset);
        s.phase = "ready";
        if (!this.backpressured && !this.stopping) this.loop.resume([s.tp]);
        this.emit("partitions.restored", {
          topic: s.tp.topic,
          partition: s.tp.partition,
          dedupEntries: stats.entries,
          durationMs: Date.now() - started,
        });
        this.o.log.info(
          { topic: s.tp.topic, partition: s.tp.partition, offset, groupOffset, dedupEntries: stats.entries },
          "partition restored",
        );
      }
    } catch (error) {
      const live = current();
      this.o.log.warn(
        { partitions: live.map((s) => s.key), err: error instanceof Error ? error.message : String(error) },
        `partition restore failed; retrying in ${this.o.restoreRetryMs} ms`,
      );
      await Promise.all(
        live.map(async (s) => {
          const c = s.committer;
          s.committer = undefined;
          await c?.close({ commit: false });
        }),
      );
      if (live.length === 0 || this.stopping) return;
      await new Promise((r) => setTimeout(r, this.o.restoreRetryMs));
      const still = live.filter((s) => s.phase === "restoring" && s.generation === generations.get(s));
      if (still.length > 0 && !this.stopping) await this.restore(still);
    }
  }

  /**
   * Initialises the partition's transactional producer (fencing any previous owner) and installs it,
   * unless the restore went stale meanwhile (revoked, reset again, stopping): then it is closed here.
   */
  private async initCommitter(s: PartitionState, stale: (s: PartitionState) => boolean): Promise<void> {
    if (stale(s)) return;
    let created: PartitionCommitter | undefined;
    created = await PartitionCommitter.create({
      kafka: this.o.kafka,
      groupId: this.o.groupId,
      topic: s.tp.topic,
      partition: s.tp.partition,
      events: this.o.events,
      commitIntervalMs: this.o.commitIntervalMs,
      transactionTimeoutMs: this.o.transactionTimeoutMs,
      transactions: this.o.transactions,
      maxTransactionRecords: this.o.maxTransactionRecords,
      maxTransactionBytes: this.o.maxTransactionBytes,
      deadLetterTopic: this.o.deadLetterTopic,
      // Records waiting for commit count toward maxQueuedRecords; a commit may end the pause.
      onCommitted: () => {
        s.fences = 0;
        this.maybeResume();
      },
      // At-least-once: the offset is committed by our group member after the outputs are acked.
      commitOffset: (nextOffset) => this.loop.commitOffset(s.tp, nextOffset),
      offsetCheckpoint: { topic: s.changelogTopic, partition: s.tp.partition },
      // Only the partition's current committer may reset it; a late failure of a replaced one is moot.
      onFailure: (error) => {
        if (created !== undefined && s.committer === created) this.reset(s, error);
      },
    });
    if (stale(s)) {
      await created.close({ commit: false });
      return;
    }
    s.committer = created;
  }

  /** Committed offset per partition; without one, the partition's earliest offset. */
  private async committedOffsets(tps: TopicPartition[]): Promise<Map<string, string>> {
    const admin = this.admin as Admin;
    const out = new Map<string, string>();
    const topics = [...new Set(tps.map((t) => t.topic))];
    const committed = await admin.fetchOffsets({ groupId: this.o.groupId, topics });
    for (const t of committed) {
      const low = new Map<number, string>();
      const needLow = t.partitions.some((p) => p.offset === "-1" || p.offset === "");
      if (needLow) for (const p of await admin.fetchTopicOffsets(t.topic)) low.set(p.partition, p.low);
      for (const p of t.partitions) {
        const key = keyOf({ topic: t.topic, partition: p.partition });
        out.set(key, p.offset === "-1" || p.offset === "" ? (low.get(p.partition) ?? "0") : p.offset);
      }
    }
    return out;
  }

  // ── intake ─────────────────────────────────────────────────────────────────────────────────────

  private onRecords(
    topic: string,
    partition: number,
    messages: KafkaMessage[],
    fetchedOffset: string,
  ): "accepted" | "refused" | "ignored" {
    if (this.stopping) return "refused";
    const state = this.states.get(keyOf({ topic, partition }));
    if (state?.phase !== "ready" || !state.committer || !state.dedup) return "refused";
    if (state.awaitingFetchFrom !== undefined) {
      // A fetch that started above the restored offset is either stale (queued before our seek;
      // accepting it would skip records) or kafkajs stepped over transaction markers at that offset by
      // itself. Re-seek a few times to rule out the first; then it is the second.
      if (BigInt(fetchedOffset) > state.awaitingFetchFrom && state.staleFetches < 3) {
        state.staleFetches++;
        this.loop.seek(state.tp, state.awaitingFetchFrom.toString());
        return "ignored";
      }
      state.awaitingFetchFrom = undefined;
    }
    for (const m of messages) {
      const offset = BigInt(m.offset);
      // kafkajs re-fetches from the committed offset after a rejoin; records we already hold are skipped.
      if (offset < state.nextOffset) continue;
      state.nextOffset = offset + 1n;
      state.committer.track(m.offset);
      state.outstanding++;
      this.take(state, m);
    }
    if (!this.backpressured && this.queuedRecords() >= this.o.maxQueuedRecords) {
      this.backpressured = true;
      this.safePause(this.readyPartitions());
      // Completed records waiting for their transaction count toward the bound: commit them now.
      for (const s of this.states.values()) if (s.phase === "ready") s.committer?.commitSoon();
      this.emit("consumer.paused", {
        reason: `maxQueuedRecords=${this.o.maxQueuedRecords} reached`,
      });
    }
    return "accepted";
  }

  private take(state: PartitionState, m: KafkaMessage): void {
    const timestampMs = Number(m.timestamp);
    this.emit("record.consumed", {
      topic: state.tp.topic,
      partition: state.tp.partition,
      offset: m.offset,
      timestampMs,
    });
    const source: DeadLetterSource = {
      topic: state.tp.topic,
      partition: state.tp.partition,
      offset: m.offset,
      key: m.key ?? null,
      value: m.value ?? null,
      headers: m.headers as RecordHeaders | undefined,
      timestamp: m.timestamp,
    };
    const decoded = this.decoder.decode(
      m.value ?? null,
      m.headers as RecordHeaders | undefined,
      m.key ?? null,
    );
    if (!decoded.ok) {
      const stage: DeadLetterStage = decoded.code === "DECODE_FAILED" ? "decode" : "validate";
      this.complete(
        state,
        state.generation,
        m.offset,
        this.deadLetter(source, decoded.code, decoded.message, stage, timestampMs),
      );
      return;
    }
    const now = Date.now();
    const dedup = state.dedup as Deduplicator;
    const { request } = decoded;
    if (dedup.seen(request.id, now)) {
      this.complete(state, state.generation, m.offset, {
        messages: [],
        outcome: "duplicate",
        recordTimestampMs: timestampMs,
      });
      return;
    }
    // Remember at intake so a duplicate later in the same batch is caught too. If the transaction
    // carrying this entry fails, the partition is reset and the dedup store rebuilt from the changelog.
    const changelog = [dedup.remember(request.id, now), ...dedup.evictExpired(now)];
    const deadlineMs =
      request.deadlineMs ?? (Number.isFinite(timestampMs) ? timestampMs : now) + this.o.defaultTimeoutMs;
    let tokens = 0;
    try {
      tokens = typeof request.text === "string" ? this.o.model.countTokens(request.text) : 0;
    } catch {
      tokens = 0; // the model reports the real problem per item when the batch runs
    }
    const item: WorkItem = {
      state,
      generation: state.generation,
      source,
      timestampMs,
      request,
      changelog,
      deadlineMs,
      enqueuedAtMs: now,
    };
    this.batcher.add(item, { tokens, deadlineMs });
  }

  // ── batches and inference ──────────────────────────────────────────────────────────────────────

  private onBatch(batch: MicroBatch<WorkItem>): void {
    this.emit("batch.flushed", {
      reason: batch.reason,
      size: batch.items.length,
      tokens: batch.tokens,
      queueWaitMs: batch.enqueuedAtMs.map((t) => batch.formedAtMs - t),
    });
    this.waitingBatches.push(batch);
    this.pump();
  }

  private pump(): void {
    while (this.inFlightBatches < this.o.maxInFlightBatches && this.waitingBatches.length > 0) {
      const batch = this.waitingBatches.shift() as MicroBatch<WorkItem>; // tiny list (bounded by queue)
      this.inFlightBatches++;
      void this.runBatch(batch)
        .catch((error) => this.o.log.error({ err: String(error) }, "batch handling failed unexpectedly"))
        .finally(() => {
          this.inFlightBatches--;
          this.pump();
          this.notifyIdle();
        });
    }
    this.notifyIdle();
  }

  private async runBatch(batch: MicroBatch<WorkItem>): Promise<void> {
    const live = (item: WorkItem) =>
      item.generation === item.state.generation && item.state.phase === "ready";
    const items = batch.items.filter(live);
    if (items.length === 0) return;
    const startedAt = Date.now();
    const toRun: WorkItem[] = [];
    let expired = 0;
    for (const item of items) {
      if (item.deadlineMs <= startedAt) {
        expired++;
        this.finishItem(item, expiredOutcome(item.deadlineMs, startedAt), {
          queueMs: startedAt - item.enqueuedAtMs,
          inferenceMs: 0,
          batchSize: items.length,
        });
      } else {
        toRun.push(item);
      }
    }
    let failed = 0;
    let stats = { inferenceMs: 0, realTokens: 0, paddedTokens: 0 };
    if (toRun.length > 0) {
      let outcomes: ItemOutcome[];
      try {
        const run = await this.o.model.run(toRun.map((i) => i.request.text));
        outcomes = run.outcomes;
        stats = run.stats;
      } catch (error) {
        const message = `model failed for the whole batch: ${error instanceof Error ? error.message : String(error)}`;
        outcomes = toRun.map(() => ({ ok: false as const, code: "INFERENCE_FAILED" as const, message }));
      }
      this.inferenceEstimateMs =
        this.inferenceEstimateMs === 0
          ? stats.inferenceMs
          : 0.8 * this.inferenceEstimateMs + 0.2 * stats.inferenceMs;
      this.batcher.setEstimatedInferenceMs(this.inferenceEstimateMs);
      toRun.forEach((item, i) => {
        const outcome: ItemOutcome = outcomes[i] ?? {
          ok: false,
          code: "INFERENCE_FAILED",
          message: "model returned fewer outcomes than inputs",
        };
        if (!outcome.ok) failed++;
        if (live(item)) {
          this.finishItem(item, outcome, {
            queueMs: startedAt - item.enqueuedAtMs,
            inferenceMs: stats.inferenceMs,
            batchSize: toRun.length,
          });
        }
      });
      this.emit("batch.inferred", {
        size: toRun.length,
        inferenceMs: stats.inferenceMs,
        realTokens: stats.realTokens,
        paddedTokens: stats.paddedTokens,
        expired,
        failed,
      });
    } else {
      this.emit("batch.inferred", {
        size: 0,
        inferenceMs: 0,
        realTokens: 0,
        paddedTokens: 0,
        expired,
        failed: 0,
      });
    }
    // The request log's line (BatchLog); ids are hashed there, text never goes on the bus.
    this.emit("batch.completed", {
      reason: batch.reason,
      size: items.length,
      tokens: stats.realTokens,
      paddedTokens: stats.paddedTokens,
      queueWaitMs: items.map((i) => batch.formedAtMs - i.enqueuedAtMs),
      inferenceMs: stats.inferenceMs,
      ok: toRun.length - failed,
      expired,
      failed,
      requestIds: items.map((i) => i.request.id),
      sources: items.map((i) => ({ topic: i.source.topic, partition: i.source.partition })),
    });
  }

  private finishItem(
    item: WorkItem,
    outcome: ResultOutcome,
    timing: { queueMs: number; inferenceMs: number; batchSize: number },
  ): void {
    const ctx: ResultContext = {
      request: item.request,
      source: { topic: item.source.topic, partition: item.source.partition, offset: item.source.offset },
      requestTimestamp: item.timestampMs,
      model: this.o.model.identity,
      queueMs: Math.max(0, timing.queueMs),
      inferenceMs: timing.inferenceMs,
      batchSize: timing.batchSize,
      completedAt: Date.now(),
    };
    const route = routeOutcome(ctx, outcome);
    const changelog = item.changelog.map((e) => this.changelogMessage(item.state, e));
    let completion: RecordCompletion;
    if (route.kind === "dead_letter") {
      const dl = this.deadLetter(
        item.source,
        route.error.code,
        route.error.message,
        "model",
        item.timestampMs,
      );
      completion = { ...dl, messages: [...dl.messages, ...changelog] };
    } else {
      let encoded: { value: Buffer; headers: Record<string, string> } | undefined;
      let encodeError = "";
      try {
        encoded = this.encoder.encode(route.result);
      } catch (error) {
        // e.g. a value the Avro schema rejects: this record fails, its neighbours don't.
        encodeError = `result could not be encoded: ${error instanceof Error ? error.message : String(error)}`;
      }
      if (encoded) {
        completion = {
          messages: [
            {
              topic: this.o.resultsTopic,
              key: item.request.id,
              value: encoded.value,
              headers: encoded.headers,
            },
            ...changelog,
          ],
          outcome: "result",
          status: route.result.status,
          ...(route.result.error ? { errorCode: route.result.error.code } : {}),
          recordTimestampMs: item.timestampMs,
        };
      } else {
        const dl = this.deadLetter(item.source, "INTERNAL", encodeError, "deliver", item.timestampMs);
        completion = { ...dl, messages: [...dl.messages, ...changelog] };
      }
    }
    this.complete(item.state, item.generation, item.source.offset, completion);
  }

  private deadLetter(
    source: DeadLetterSource,
    code: string,
    message: string,
    stage: DeadLetterStage,
    timestampMs: number,
  ): RecordCompletion {
    // Fits one transaction and one send (and so the broker's default message size limit).
    const maxBytes = Math.min(this.o.maxTransactionBytes, MAX_SEND_BYTES) - 64;
    const dl = buildDeadLetter(source, { code, message, stage }, { maxBytes });
    const msg: OutboundMessage = {
      topic: this.o.deadLetterTopic,
      key: dl.key,
      value: dl.value,
      headers: dl.headers as OutboundMessage["headers"],
      timestamp: dl.timestamp,
    };
    return { messages: [msg], outcome: "dead_letter", errorCode: code, recordTimestampMs: timestampMs };
  }

  private changelogMessage(state: PartitionState, e: ChangelogEntry): OutboundMessage {
    return { topic: state.changelogTopic, partition: state.tp.partition, key: e.key, value: e.value };
  }

  private complete(
    state: PartitionState,
    generation: number,
    offset: string,
    completion: RecordCompletion,
  ): void {
    if (generation !== state.generation || !state.committer) return;
    state.committer.complete(offset, completion);
    state.outstanding--;
    if (this.backpressured) state.committer.commitSoon();
    this.maybeResume();
  }

  // ── backpressure and idleness ──────────────────────────────────────────────────────────────────

  /**
   * Records taken from Kafka and not yet committed: in the batcher, inferring, or completed and
   * waiting for their transaction. Counting the last kind bounds memory when commits lag behind
   * a fast model (a long commitIntervalMs, a slow broker).
   */
  private queuedRecords(): number {
    let n = 0;
    for (const s of this.states.values()) n += Math.max(s.outstanding, s.committer?.pendingRecords ?? 0);
    return n;
  }

  private maybeResume(): void {
    if (!this.backpressured || this.stopping) return;
    // Hysteresis: resume at half the bound so pause/resume does not flap per record.
    if (this.queuedRecords() > this.o.maxQueuedRecords / 2) return;
    this.backpressured = false;
    this.safeResume(this.readyPartitions());
    this.emit("consumer.resumed", {});
  }

  private readyPartitions(): TopicPartition[] {
    return [...this.states.values()].filter((s) => s.phase === "ready").map((s) => s.tp);
  }

  private safePause(tps: TopicPartition[]): void {
    try {
      this.loop.pause(tps);
    } catch (error) {
      // Before the first join kafkajs has no group to pause in; onRecords refuses records instead.
      this.o.log.warn({ err: String(error) }, "pausing partitions failed");
    }
  }

  private safeResume(tps: TopicPartition[]): void {
    try {
      this.loop.resume(tps);
    } catch (error) {
      // Only when the consumer is not running (stopping or crashed); never let it break completion.
      this.o.log.warn({ err: String(error) }, "resuming partitions failed");
    }
  }

  private whenIdle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return this.inFlightBatches === 0 && this.waitingBatches.length === 0 && this.batcher.size === 0;
  }

  private notifyIdle(): void {
    if (!this.isIdle() || this.idleWaiters.length === 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** A throwing subscriber (a metrics bug) must never break the pipeline or lose records. */
  private emit<K extends SluiceEventName>(name: K, payload: SluiceEventMap[K]): void {
    try {
      this.o.events.emit(name, payload);
    } catch (error) {
      this.o.log.error({ event: name, err: String(error) }, "event subscriber threw; ignored");
    }
  }

  /** Starts a restore and remembers it so shutdown can wait for it. */
  private startRestore(states: PartitionState[]): void {
    const p = this.restore(states).finally(() => this.restores.delete(p));
    this.restores.add(p);
  }

  private fatal(error: SluiceError): void {
    this.o.log.error({ code: error.code, err: error.message }, "stream processor cannot continue");
    if (this.fatalHandler) this.fatalHandler(error);
  }
}

function keyOf(tp: TopicPartition): string {
  return `${tp.topic}:${tp.partition}`;
}

function emitByTopic(tps: TopicPartition[], emit: (topic: string, partitions: number[]) => void): void {
  const byTopic = new Map<string, number[]>();
  for (const tp of tps) byTopic.set(tp.topic, [...(byTopic.get(tp.topic) ?? []), tp.partition]);
  for (const [topic, partitions] of byTopic) emit(topic, partitions);
}
