import type { FallbackReason } from "../contracts/inference.js";
import type { CompletionBuilder } from "../delivery/completion-builder.js";
import type { RecordCompletion } from "../delivery/outbound-message.js";
import { expiredOutcome, type ResultOutcome } from "../delivery/result-builder.js";
import type { SluiceEventMap, SluiceEventName } from "../events/sluice-events.js";
import type { FallbackPolicy } from "../fallback/fallback-policy.js";
import type { LaneBatch } from "../microbatch/lane-batcher.js";
import { type ModelCallStats, type ModelPort, modelInputOf, runBatch } from "../model/model-port.js";
import type { Clock } from "../time/clock.js";
import { NO_TRACING_TRACER, type PipelineTracer } from "../tracing/pipeline-tracer.js";
import { groupByModel, type ModelRouter } from "./model-router.js";
import type { PartitionTask } from "./partition-task.js";
import type { WorkItem } from "./request-intake.js";
import type { ShadowScorer } from "./shadow-scorer.js";
import { abortVoid, givenUpCode } from "./work-item-spans.js";

/** What a MicroBatchRunner needs of the processor (docs/design.md §6.17: a minimal context, not the owner). */
export interface MicroBatchRunnerContext {
  model: ModelPort;
  /** Which model answers each item (docs/model-upgrades.md); unset = `model` answers all. */
  router?: ModelRouter | undefined;
  /** Shadow scoring by the candidate (docs/model-upgrades.md); unset = none. */
  shadow?: ShadowScorer | undefined;
  completions: CompletionBuilder;
  clock: Pick<Clock, "now">;
  /** Unset: no fallback rules (requests expire or dead-letter as without lanes). */
  fallback: FallbackPolicy | undefined;
  emit<K extends SluiceEventName>(name: K, payload: SluiceEventMap[K]): void;
  /** Measured inference ms per item (0 = not measured yet). */
  msPerItem(): number;
  recordInference(size: number, inferenceMs: number): void;
  complete(task: PartitionTask, generation: number, offset: string, completion: RecordCompletion): void;
  /** The micro-batch and model-call spans (docs/observability.md, "Tracing"). Default: off. */
  tracer?: PipelineTracer;
}

/**
 * Runs one formed batch to its completions: void items skipped, expired (or, with fallback rules,
 * predicted-late online) items answered without the model, the model call in the batch's lane, and
 * per-item outcomes (an online item the model failed for gets the fallback when there are rules).
 */
export class MicroBatchRunner {
  constructor(private readonly ctx: MicroBatchRunnerContext) {}

  async run(batch: LaneBatch<WorkItem>): Promise<void> {
    const live = (item: WorkItem) => item.task.isCurrent(item.generation);
    abortVoid(batch.items);
    const items = batch.items.filter(live);
    if (items.length === 0) return;
    const span = (this.ctx.tracer ?? NO_TRACING_TRACER).startBatch(batch.lane, batch.reason, items);
    const startedAt = this.ctx.clock.now();
    const toRun: WorkItem[] = [];
    let expired = 0;
    let fellBack = 0;
    for (const item of items) {
      const late = this.fallbackFor(item)?.atDispatch(
        item.deadlineMs,
        startedAt,
        items.length,
        this.ctx.msPerItem(),
      );
      if (late !== undefined) {
        fellBack++;
        this.fallback(item, late, startedAt);
      } else if (item.deadlineMs <= startedAt) {
        expired++;
        this.finish(item, expiredOutcome(item.deadlineMs, startedAt), startedAt, 0, items.length);
      } else {
        toRun.push(item);
      }
    }
    let failed = 0;
    const stats: ModelCallStats = { inferenceMs: 0, realTokens: 0, paddedTokens: 0 };
    // One model call per model the items need: several only while a partition switches at its
    // boundary, or when backfill rows of a candidate run share the batch (docs/model-upgrades.md).
    const { groups, refused } = groupByModel(toRun, this.ctx.router, this.ctx.model);
    for (const r of refused) {
      failed++;
      this.finish(
        r.item,
        { ok: false, code: "MODEL_VERSION_UNAVAILABLE", message: r.message },
        startedAt,
        0,
        0,
      );
    }
    // Each model has its own workers: the calls of one batch run side by side, and each group's
    // items complete as soon as its own call returns.
    const runGroup = async (group: (typeof groups)[number]): Promise<void> => {
      let tokens = 0;
      for (const item of group.items) tokens += item.tokens;
      const call = span.modelCall(group.model.identity, group.items.length, tokens);
      const run = await runBatch(
        group.model,
        group.items.map((i) => modelInputOf(group.model.task, i.request)),
        "items",
        { lane: batch.lane },
      );
      call.end(wholeBatchFailure(run.outcomes));
      stats.inferenceMs += run.stats.inferenceMs;
      stats.realTokens += run.stats.realTokens;
      stats.paddedTokens += run.stats.paddedTokens;
      if (run.stats.cpuMs !== undefined) stats.cpuMs = (stats.cpuMs ?? 0) + run.stats.cpuMs;
      this.ctx.recordInference(group.items.length, run.stats.inferenceMs);
      // Each item's even share of the call's model CPU, reported with a backfill run's rows.
      const cpuMsPerItem = (run.stats.cpuMs ?? 0) / group.items.length;
      group.items.forEach((item, i) => {
        const outcome = run.outcomes[i] as ResultOutcome;
        if (!outcome.ok) failed++;
        if (!live(item)) {
          item.span.abort(givenUpCode(item.task, item.generation));
          return;
        }
        // Only a backfill run's rows report their cost (finish), so only they get the object.
        const cost =
          item.runId === undefined
            ? undefined
            : { cpuMs: cpuMsPerItem, tokens: outcome.ok ? outcome.tokens : 0 };
        const reason = outcome.ok ? undefined : this.fallbackFor(item)?.afterModel(outcome.code);
        const size = group.items.length;
        if (reason !== undefined) this.fallback(item, reason, startedAt, run.stats.inferenceMs, size);
        else this.finish(item, outcome, startedAt, run.stats.inferenceMs, size, cost, group.model);
        // After the online answer, never before it: the shadow call is off the online path.
        if (outcome.ok && this.ctx.shadow)
          this.ctx.shadow.offer(item, {
            output: outcome.output,
            model: group.model.identity,
            msPerItem: run.stats.inferenceMs / size,
            cpuMsPerItem: run.stats.cpuMs === undefined ? undefined : cpuMsPerItem,
          });
      });
    };
    await Promise.all(groups.map(runGroup));
    span.end();
    this.ctx.emit("microbatch.inferred", { lane: batch.lane, size: toRun.length, ...stats, expired, failed });
    // The request log's line (BatchLog); ids are hashed there, text never goes on the bus.
    this.ctx.emit("microbatch.completed", {
      reason: batch.reason,
      lane: batch.lane,
      size: items.length,
      tokens: stats.realTokens,
      paddedTokens: stats.paddedTokens,
      queueWaitMs: items.map((i) => batch.formedAtMs - i.enqueuedAtMs),
      inferenceMs: stats.inferenceMs,
      ok: toRun.length - failed,
      expired: expired + fellBack,
      failed,
      requestIds: items.map((i) => i.request.id),
      sources: items.map((i) => i.task.tp),
    });
  }

  /** The model answering `item` (expired and fallback results name it too); the default when refused. */
  private modelOf(item: WorkItem): ModelPort {
    const choice = this.ctx.router?.choose(item);
    return choice?.ok ? choice.model : this.ctx.model;
  }

  /** The policy that applies to `item`: online items only, and only with rules. */
  fallbackFor(item: WorkItem): FallbackPolicy | undefined {
    return item.lane === "online" ? this.ctx.fallback : undefined;
  }

  /** Answers `item` with the fallback rules' output (status fallback). */
  fallback(item: WorkItem, reason: FallbackReason, startedAt: number, inferenceMs = 0, batchSize = 0): void {
    const rules = this.ctx.fallback?.rules;
    if (rules === undefined) return;
    const { output } = rules.answer(item.request.text);
    this.finish(
      item,
      { ok: true, output, tokens: 0, truncated: false, fallbackReason: reason },
      startedAt,
      inferenceMs,
      batchSize,
    );
  }

  finish(
    item: WorkItem,
    outcome: ResultOutcome,
    startedAt: number,
    inferenceMs: number,
    batchSize: number,
    cost?: { cpuMs: number; tokens: number },
    model: ModelPort = this.modelOf(item),
  ): void {
    const ctx = {
      request: item.request,
      lane: item.lane,
      runId: item.runId,
      source: item.source, // the record's topic, partition and offset (the task's, at intake)
      requestTimestamp: item.timestampMs,
      // The version that really produced the outcome (docs/model-upgrades.md).
      model: model.identity,
      queueMs: Math.max(0, startedAt - item.enqueuedAtMs),
      inferenceMs,
      batchSize,
      completedAt: this.ctx.clock.now(),
    };
    const completion = this.ctx.completions.outcome(item.source, ctx, outcome, item.remembered, item.span);
    // Counted by sluice_fallbacks_total{reason} when it commits.
    if (completion.status === "fallback" && "fallbackReason" in outcome)
      completion.fallbackReason = outcome.fallbackReason;
    item.span.completed(completion);
    // A backfill run's rows carry their model cost; the committer sums it per run (docs/batch-mode.md).
    if (item.runId !== undefined)
      completion.runCost = { runId: item.runId, items: 1, ...(cost ?? { cpuMs: 0, tokens: 0 }) };
    this.ctx.complete(item.task, item.generation, item.source.offset, completion);
  }
}

/** The code of a call that failed as a whole (every item INFERENCE_FAILED); undefined otherwise. */
function wholeBatchFailure(outcomes: readonly { ok: boolean; code?: string }[]): string | undefined {
  for (const outcome of outcomes) if (outcome.ok || outcome.code !== "INFERENCE_FAILED") return undefined;
  return outcomes.length > 0 ? "INFERENCE_FAILED" : undefined;
}
