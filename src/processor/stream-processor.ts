import { RequestDecoder } from "../contracts/request-codec.js";
import { partitionsByTopic, type TopicPartition, topicPartitionKey } from "../contracts/topic-partition.js";
import type { CompletionBuilder } from "../delivery/completion-builder.js";
import type { RecordCompletion } from "../delivery/outbound-message.js";
import type { SluiceEventMap, SluiceEventName, SluiceEvents } from "../events/sluice-events.js";
import type { FallbackPolicy } from "../fallback/fallback-policy.js";
import type { LaneBatch } from "../microbatch/lane-batcher.js";
import type { ModelPort } from "../model/model-port.js";
import { SluiceError } from "../sluice-error.js";
import type { Clock } from "../time/clock.js";
import type { PipelineTracer } from "../tracing/pipeline-tracer.js";
import { BackfillThrottle } from "./backfill-throttle.js";
import { IntakePacer } from "./intake-pacer.js";
import { LaneDispatcher } from "./lane-dispatcher.js";
import { LaneFlowControl } from "./lane-flow-control.js";
import { MicroBatchRunner } from "./micro-batch-runner.js";
import type { ModelRouter } from "./model-router.js";
import type { PartitionRestorer, RestoreContext } from "./partition-restorer.js";
import { PartitionTask } from "./partition-task.js";
import type { CommitterFactory, FetchedRecord, RecordSource, TaskCommitter } from "./processor-ports.js";
import { type ProcessorReadiness, processorReadiness } from "./processor-readiness.js";
import { RequestIntake, type WorkItem } from "./request-intake.js";
import type { ShadowScorer } from "./shadow-scorer.js";
import { ShutdownBudget } from "./shutdown-budget.js";
import type { ProcessorLog, ProcessorSettings } from "./stream-processor-options.js";
import { abortAll } from "./work-item-spans.js";
import { WriterSchemaGate } from "./writer-schema-gate.js";

/** The collaborators, made by the composition root (src/app/stream-processor-factory.ts) or a test. */
export interface StreamProcessorDeps {
  source: RecordSource;
  restorer: PartitionRestorer;
  committers: CommitterFactory;
  model: ModelPort;
  /** Which loaded model answers each item (docs/model-upgrades.md); unset = `model` answers all. */
  router?: ModelRouter;
  /** Shadow scoring by the candidate (docs/model-upgrades.md); unset = none. */
  shadow?: ShadowScorer;
  completions: CompletionBuilder;
  events: SluiceEvents;
  log: ProcessorLog;
  clock: Clock;
  /** Changelog topic of a request topic (src/kafka/client/topic-admin.ts `changelogTopicFor`). */
  changelogTopicOf: (requestTopic: string) => string;
  /** Request decoder (with registry writer schemas for avro-registry); default: built from the settings. */
  decoder?: RequestDecoder;
  /** Fallback rules and when they apply (docs/lanes.md); unset = no fallback. */
  fallback?: FallbackPolicy;
  /** Checked before the consumer starts: the topics the committers write exist (a TOPIC_MISSING stops start()). */
  outputsReady?: () => Promise<void>;
  /** Request and micro-batch spans (docs/observability.md, "Tracing"); unset = tracing off. */
  tracer?: PipelineTracer;
}

/**
 * The online pipeline: RecordSource → RequestDecoder → Deduplicator → LaneDispatcher (LaneBatcher) → model →
 * PartitionTask's committer. It keeps the lifecycle, assignment → tasks, intake and dispatch, and
 * wires the rest: each owned partition is a PartitionTask, restores are the PartitionRestorer's,
 * pausing and resuming partitions is the LaneFlowControl's, the SLO guard's levers the
 * BackfillThrottle's, and what a record publishes is the CompletionBuilder's (docs/architecture.md,
 * docs/processor.md).
 *
 * Recovery tiers (docs/design.md §6.4): a fenced or failed transaction voids the task's in-flight work
 * (its generation changes) and the task is reclaimed exactly like a fresh assignment; a source
 * failure it cannot recover from is fatal and reported through `onFatal`.
 */
export class StreamProcessor {
  private readonly opts: ProcessorSettings;
  private readonly deps: StreamProcessorDeps;
  private readonly intake: RequestIntake;
  private readonly pacer: IntakePacer<PartitionTask>;
  private readonly schemaGate: WriterSchemaGate;
  private readonly dispatcher: LaneDispatcher;
  private readonly batches: MicroBatchRunner;
  /** Which lanes' partitions fetch: the queue bound and the guard's hold on backfill fetches. */
  private readonly flow: LaneFlowControl;
  /** The backfill lane's SLO guard (docs/lanes.md); undefined without backfill topics or with lanes.guard off. */
  private readonly throttle: BackfillThrottle | undefined;
  private readonly tasks = new Map<string, PartitionTask>();
  private readonly restoreContext: RestoreContext;
  private started = false;
  private stopping = false;
  private closing: Promise<void> | undefined;
  /** Records fetched but not started when the stop began (left to the next owner). */
  private leftToNextOwner = 0;
  private fatalHandler: ((error: SluiceError) => void) | undefined;
  /** A partition stopped for good (TOPIC_MISSING): told once. */
  private halted = false;
  /** Between REBALANCING and the next assignment: a fenced partition's reclaim waits for the assignment. */
  private rebalancing = false;

  constructor(settings: ProcessorSettings, deps: StreamProcessorDeps) {
    this.opts = settings;
    this.deps = deps;
    const decoder =
      deps.decoder ??
      new RequestDecoder({
        defaultCodec: settings.requestCodec,
        maxMessageBytes: settings.maxMessageBytes,
        servedModel: deps.model.identity.name,
      });
    this.schemaGate = new WriterSchemaGate({
      decoder,
      log: deps.log,
      retryInitialMs: settings.schemaRetryInitialMs,
      retryMaxMs: settings.schemaRetryMaxMs,
      resume: (task) => task.running && this.flow.resumeUnlessHeld(task.tp, task.lane, false),
    });
    this.intake = new RequestIntake({
      decoder,
      completions: deps.completions,
      model: deps.model,
      clock: deps.clock,
      defaultTimeoutMs: settings.defaultTimeoutMs,
      tracer: deps.tracer,
    });
    this.pacer = new IntakePacer({
      take: (t, r) => this.take(t, r),
      afterSlice: () => this.flow.afterTaken(),
    });
    this.dispatcher = new LaneDispatcher({
      settings,
      clock: deps.clock,
      emitFlushed: (payload) => this.emit("microbatch.flushed", payload),
      // Once stopping, a batch that has not started is left to the next owner (offsets uncommitted).
      run: (batch) => (this.stopping ? this.leaveToNextOwner(batch) : this.batches.run(batch)),
      onError: (error) => this.deps.log.error({ err: String(error) }, "batch handling failed unexpectedly"),
    });
    this.batches = new MicroBatchRunner({
      model: deps.model,
      router: deps.router,
      shadow: deps.shadow,
      completions: deps.completions,
      clock: deps.clock,
      fallback: deps.fallback,
      emit: (name, payload) => this.emit(name, payload),
      msPerItem: () => this.dispatcher.msPerItem,
      recordInference: (size, ms) => this.dispatcher.recordInference(size, ms),
      complete: (task, generation, offset, completion) => this.complete(task, generation, offset, completion),
      tracer: deps.tracer,
    });
    this.flow = new LaneFlowControl(
      {
        source: deps.source,
        events: deps.events,
        log: deps.log,
        tasks: () => this.tasks.values(),
        isStopping: () => this.stopping,
      },
      settings.maxQueuedRecords,
      settings.backfillTopics.length > 0,
    );
    this.throttle = BackfillThrottle.forSettings(settings, {
      events: deps.events,
      clock: deps.clock,
      log: deps.log,
      oldestOnlineInFlightMs: () => this.dispatcher.oldestOnlineTimestampMs(),
      levers: {
        setBatchSlots: (slots) => this.dispatcher.setBackfillSlots(slots),
        limitModel: (limits) => this.deps.model.limitBackfill?.(limits),
        holdFetches: (paused) => this.flow.holdBackfill(paused),
      },
    });
    this.restoreContext = {
      isStopping: () => this.stopping,
      createCommitter: (task) => this.createCommitter(task),
      dedupEntriesPerPartition: () => this.dedupEntriesPerPartition(),
      onRestored: (task, info) => {
        this.deps.source.seek(task.tp, info.offset);
        // An online partition switches models at a recorded boundary, or holds (docs/model-upgrades.md).
        const hold =
          task.lane === "online" &&
          this.deps.router?.onRestored?.(task, info.offset, info.modelBoundary) === "hold";
        this.flow.resumeUnlessHeld(task.tp, task.lane, hold);
        const { dedupEntries, durationMs } = info;
        this.emit("partitions.restored", { ...task.tp, dedupEntries, durationMs });
        this.deps.log.info({ ...task.tp, ...info }, "partition restored");
      },
    };
    this.deps.router?.bind?.(this.flow.switchPartitions());
  }

  /** Called once if the processor cannot continue (the consumer died for good). */
  onFatal(handler: (error: SluiceError) => void): void {
    this.fatalHandler = handler;
  }

  async start(): Promise<void> {
    if (this.started) throw new SluiceError("INTERNAL", "StreamProcessor.start() called twice");
    this.started = true;
    await this.deps.outputsReady?.();
    await this.deps.source.start({
      onAssigned: (assignment) => this.onAssigned(assignment),
      onRebalancing: () => this.onRebalancing(),
      onRecords: (topic, partition, records, fetchedOffset) =>
        this.onRecords(topic, partition, records, fetchedOffset),
      onFatal: (error) => this.fatal(error),
    });
    this.throttle?.start();
    this.deps.log.info(
      {
        groupId: this.opts.groupId,
        topics: this.opts.requestTopics,
        backfillTopics: this.opts.backfillTopics,
        model: this.deps.model.identity,
        delivery: this.opts.transactions ? "transactions" : "at-least-once",
      },
      "stream processor started",
    );
  }

  /** Ready = started, not stopping, has partitions, all of them restored, and no model refused. */
  readiness(): ProcessorReadiness {
    return processorReadiness({
      started: this.started,
      stopping: this.stopping,
      tasks: [...this.tasks.values()],
      refusals: this.deps.router?.refusals?.() ?? [],
    });
  }

  /** Currently assigned partitions and their state (for status output and tests). */
  assignment(): { topic: string; partition: number; phase: string }[] {
    return [...this.tasks.values()].map((t) => ({ ...t.tp, phase: t.running ? "ready" : t.state }));
  }

  /**
   * Graceful stop within `timeoutMs` (config `shutdown.timeoutMs`; default unbounded): stop
   * fetching; leave records fetched but not yet in a batch to the next owner (their offsets are not
   * committed); finish the batches already formed or inferring; commit the completed prefix of each
   * partition; leave the group. Work still running when the budget ends (less a reserve for the
   * commits) is not waited for and not committed. Safe to call twice (both calls share one promise).
   */
  close(options: { timeoutMs?: number } = {}): Promise<void> {
    this.closing ??= this.shutdown(new ShutdownBudget(options.timeoutMs));
    return this.closing;
  }

  private async shutdown(budget: ShutdownBudget): Promise<void> {
    this.stopping = true;
    // Lift the guard's limits: backfill work already formed must be able to finish.
    this.throttle?.stop();
    this.schemaGate.close();
    for (const t of this.tasks.values()) t.cancelReclaim();
    try {
      this.deps.source.pause([...this.tasks.values()].map((t) => t.tp));
    } catch {
      // consumer not running (never started or already crashed)
    }
    // Fetched but not started: the next owner reads these again from the committed offset.
    this.leftToNextOwner += this.dispatcher.drop(() => true);
    this.dispatcher.close();
    const finished = await budget.waitFor(this.dispatcher.whenIdle(), true);
    // Restores in progress see `stopping` and give their producers back; wait so none is left open.
    await budget.waitFor(this.deps.restorer.settled(), true);
    const committed = await budget.waitFor(Promise.all([...this.tasks.values()].map((t) => t.closeClean())));
    await budget.waitFor(this.deps.source.close());
    await budget.waitFor(this.deps.restorer.close());
    const stats = {
      leftToNextOwner: this.leftToNextOwner,
      inFlightFinished: finished,
      committed,
      timeoutMs: budget.timeoutMs,
    };
    if (finished && committed) this.deps.log.info(stats, "stream processor stopped");
    else
      this.deps.log.warn(
        stats,
        "stream processor stopped at shutdown.timeoutMs; unfinished work is left to the next owner",
      );
  }

  private async leaveToNextOwner(batch: LaneBatch<WorkItem>): Promise<void> {
    this.leftToNextOwner += batch.items.length;
    abortAll(batch.items);
  }

  // ── assignment and task recovery ───────────────────────────────────────────────────────────────

  private onAssigned(assignment: TopicPartition[]): void {
    this.rebalancing = false;
    if (this.stopping) return; // shutdown commits and closes what we hold; take nothing new
    const keys = new Set(assignment.map((tp) => topicPartitionKey(tp.topic, tp.partition)));
    const revoked = [...this.tasks.values()].filter((t) => !keys.has(t.key));
    for (const task of revoked) this.revoke(task);
    const fresh: PartitionTask[] = [];
    const reclaim: PartitionTask[] = [];
    for (const tp of assignment) {
      const kept = this.tasks.get(topicPartitionKey(tp.topic, tp.partition));
      // Fenced earlier and the group still gives it to us: reclaim it now.
      if (kept?.cancelReclaim()) reclaim.push(kept);
      if (kept) continue;
      const lane = this.opts.backfillTopics.includes(tp.topic) ? "backfill" : "online";
      const task = new PartitionTask(tp, this.deps.changelogTopicOf(tp.topic), lane);
      this.tasks.set(task.key, task);
      fresh.push(task);
    }
    for (const [topic, partitions] of partitionsByTopic(revoked.map((t) => t.tp)))
      this.emit("partitions.revoked", { topic, partitions });
    for (const [topic, partitions] of partitionsByTopic(fresh.map((t) => t.tp)))
      this.emit("partitions.assigned", { topic, partitions });
    if (fresh.length > 0) this.flow.pause(fresh.map((t) => t.tp));
    // The dedup budget is per instance: re-split it over what we own now.
    const perPartition = this.dedupEntriesPerPartition();
    for (const t of this.tasks.values()) t.dedup?.setMaxEntries(perPartition);
    if (fresh.length + reclaim.length > 0)
      this.deps.restorer.start([...fresh, ...reclaim], this.restoreContext);
  }

  /**
   * `dedupMaxEntries` is a per-instance budget: each assigned partition gets an equal share, rounded
   * down, at least 1 (docs/exactly-once.md). Recomputed on every assignment.
   */
  private dedupEntriesPerPartition(): number {
    return Math.max(1, Math.floor(this.opts.dedupMaxEntries / Math.max(1, this.tasks.size)));
  }

  private onRebalancing(): void {
    this.rebalancing = true;
    // Commit what is complete before partitions move; a new owner then re-does less work. Safe even
    // if the commit races the new owner: it either lands before the new owner fences us (and reads
    // offsets) or fails as fenced.
    for (const t of this.tasks.values()) if (t.running) void t.committer?.flush().catch(() => undefined);
  }

  private revoke(task: PartitionTask): void {
    task.revoke();
    this.deps.router?.forget?.(task.key);
    this.tasks.delete(task.key);
    this.dispatcher.drop((item) => item.task === task);
    this.flow.afterDrained();
  }

  private async createCommitter(task: PartitionTask): Promise<TaskCommitter> {
    let created: TaskCommitter | undefined;
    created = await this.deps.committers(task.tp, task.changelogTopic, {
      // Records waiting for commit count toward maxQueuedRecords; a commit may end the pause.
      onCommitted: () => {
        task.committed();
        this.flow.afterDrained();
      },
      // Only the task's current committer may reset it; a late failure of a replaced one is moot.
      onFailure: (error) => {
        if (created !== undefined && task.committer === created) this.reset(task, error);
      },
      // The guard's commitShare lever, read by the committer whenever it schedules a commit.
      ...(task.lane === "backfill" && this.throttle ? { commitShare: this.throttle.commitShare } : {}),
      // Its transactions write the ids this deduplicator remembered (src/delivery/dedup-changelog.ts).
      dedup: () => task.dedup,
    });
    return created;
  }

  /**
   * Voids in-flight work of a task and reclaims it from its committed offset; a missing output topic
   * (TOPIC_MISSING) cannot be retried away, so that task stays paused and onFatal is told once.
   */
  private reset(task: PartitionTask, error: SluiceError): void {
    if (this.stopping || task.state === "revoked" || task.state === "closed") return;
    task.reset();
    this.dispatcher.drop((item) => item.task === task);
    this.flow.pause([task.tp]);
    if (error.code === "TOPIC_MISSING") {
      if (!this.halted) this.fatal(error);
      this.halted = true;
      return;
    }
    this.deps.log.warn(
      { ...task.tp, code: error.code, err: error.message },
      "partition reset: dropping in-flight work and reclaiming from the committed offset",
    );
    const generation = task.generation;
    const reclaim = () => {
      if (task.isRestoring(generation) && !this.stopping)
        this.deps.restorer.start([task], this.restoreContext);
    };
    if (error.code === "PRODUCER_FENCED") {
      // Our membership may be stale and a rebalance on its way: the task waits for the assignment
      // (onAssigned reclaims or revokes) or a few heartbeats (PartitionTask.reclaimAfterFence).
      task.reclaimAfterFence(this.opts, () => this.rebalancing, reclaim);
    } else {
      reclaim();
    }
    this.flow.afterDrained();
  }

  // ── intake: fetch → decode → dedup → batcher ───────────────────────────────────────────────────

  private onRecords(
    topic: string,
    partition: number,
    records: FetchedRecord[],
    fetchedOffset: string,
  ): "accepted" | "refused" | "ignored" {
    if (this.stopping) return "refused";
    const task = this.tasks.get(topicPartitionKey(topic, partition));
    if (!task) return "refused";
    // A partition that may not serve with the models loaded here takes nothing (docs/model-upgrades.md).
    if (this.deps.router?.refuses?.(task.key)) return "refused";
    // Records naming a registry schema id not loaded yet wait (partition paused) until it is.
    if (task.running && this.schemaGate.holds(task, records)) return "refused";
    // A paused backfill lane takes nothing more (a fetch already under way would overshoot its share):
    // the records are fetched again when the lane resumes.
    // (A lane the SLO guard pauses keeps what one fetch brought: refusing it would only fetch it again.)
    if (task.lane === "backfill" && this.flow.boundPauses("backfill")) return "refused";
    const verdict = task.accept(records, fetchedOffset);
    if (verdict.kind === "refused") return "refused";
    if (verdict.kind === "reseek") {
      this.deps.source.seek(task.tp, verdict.offset);
      return "ignored";
    }
    this.pacer.add(task, verdict.records);
    return "accepted";
  }

  private take(task: PartitionTask, r: FetchedRecord): void {
    const { topic, partition } = task.tp;
    this.emit("record.consumed", { topic, partition, offset: r.offset, timestampMs: Number(r.timestamp) });
    const taken = this.intake.take(task, r);
    if (taken.kind === "done") {
      this.complete(task, task.generation, r.offset, taken.completion);
      return;
    }
    const { item } = taken;
    // Online requests the model cannot serve in time fall back now, before they expire (docs/lanes.md).
    const now = item.enqueuedAtMs; // the intake's clock reading, a moment ago
    const reason = this.batches.fallbackFor(item)?.atIntake({
      onlineHeld: this.dispatcher.onlineHeld,
      ahead: this.dispatcher.onlineAhead(item.deadlineMs),
      deadlineMs: item.deadlineMs,
      nowMs: now,
      msPerItem: this.dispatcher.msPerItem,
    });
    if (reason !== undefined) this.batches.fallback(item, reason, now);
    else this.dispatcher.add(item);
  }

  // ── completions ────────────────────────────────────────────────────────────────────────────────

  private complete(
    task: PartitionTask,
    generation: number,
    offset: string,
    completion: RecordCompletion,
  ): void {
    if (task.complete(generation, offset, completion)) this.flow.afterCompleted(task);
  }

  private emit<K extends SluiceEventName>(name: K, payload: SluiceEventMap[K]): void {
    this.deps.events.emit(name, payload);
  }

  private fatal(error: SluiceError): void {
    this.deps.log.error({ code: error.code, err: error.message }, "stream processor cannot continue");
    this.fatalHandler?.(error);
  }
}
