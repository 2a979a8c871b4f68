import type { SluiceEvents } from "../events/sluice-events.js";
import { InFlightRunner } from "../microbatch/in-flight-runner.js";
import { type ItemOutcome, type ModelPort, modelInputOf, runBatch } from "../model/model-port.js";
import type { SourceRow } from "../runs/row-source.js";
import type { BatchProgressSink } from "./batch-progress-sink.js";
import type { BatchResultRow, FailureRecord } from "./batch-sink.js";

export interface ShardScorerOptions {
  model: ModelPort;
  /** Items per model call; fixed-size batches, no wait timer (throughput-bound). */
  batchSize: number;
  /** Model calls in flight at once, so a worker pool stays busy. */
  maxInFlightBatches: number;
  /** Sort a shard's items by token count before batching (less padding); output order stays input order. */
  sortByLength: boolean;
  progress?: BatchProgressSink;
  events?: SluiceEvents;
}

/** A shard's rows split by outcome: results in input order, and the rows that failed. */
export interface ScoredShard {
  rows: BatchResultRow[];
  failures: FailureRecord[];
}

/**
 * Scores one shard's items: rows that could not be read fail at once, the rest go through the model in
 * fixed-size batches (optionally length-sorted) with a bounded number in flight. A failing item never
 * fails its neighbours; a whole-batch failure (a crashed worker) stops the shard and is rethrown.
 */
export class ShardScorer {
  /** What the model spent on this scorer's calls so far: items asked, real tokens, worker CPU ms. */
  readonly spent = { items: 0, tokens: 0, modelCpuMs: 0 };

  constructor(private readonly opts: ShardScorerOptions) {}

  async score(items: readonly SourceRow[]): Promise<ScoredShard> {
    const failures: FailureRecord[] = [];
    const runnable: SourceRow[] = [];
    for (const item of items) {
      if (item.error) failures.push({ id: item.id, row: item.row, ...item.error });
      else runnable.push(item);
    }
    if (failures.length > 0) this.opts.progress?.advance(0, failures.length);
    const outcomes = await this.infer(runnable);
    const rows: BatchResultRow[] = [];
    const { name, version } = this.opts.model.identity;
    runnable.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (!outcome.ok) {
        failures.push({ id: item.id, row: item.row, code: outcome.code, message: outcome.message });
        return;
      }
      rows.push({
        id: item.id,
        row: item.row,
        status: "ok",
        output: outcome.output,
        model: { name, version },
        truncated: outcome.truncated,
        attributes: item.attributes,
        source: item.source
          ? { topic: item.source.topic, partition: item.source.partition, offset: item.source.offset }
          : null,
      });
    });
    return { rows, failures };
  }

  /** One outcome per item, in input order. */
  private async infer(items: readonly SourceRow[]): Promise<ItemOutcome[]> {
    const outcomes: ItemOutcome[] = new Array(items.length);
    if (items.length === 0) return outcomes;
    const { model, batchSize } = this.opts;
    let order = items.map((_, i) => i);
    if (this.opts.sortByLength) {
      const tokens = items.map((it) => (typeof it.text === "string" ? model.countTokens(it.text) : 0));
      // Stable on ties (index), so the batch composition and therefore the output bytes are deterministic.
      order = order.sort((a, b) => tokens[a]! - tokens[b]! || a - b);
    }
    const batches: number[][] = [];
    for (let i = 0; i < order.length; i += batchSize) batches.push(order.slice(i, i + batchSize));
    // A whole-batch failure stops the run (it resumes from the manifest); later batches are skipped.
    let failure: { error: unknown } | undefined;
    const runner = new InFlightRunner<number[]>({
      limit: this.opts.maxInFlightBatches,
      onError: (error) => {
        failure ??= { error };
      },
      run: async (batch) => {
        if (failure) return;
        const { outcomes: out, stats } = await runBatch(
          model,
          batch.map((i) => modelInputOf(model.task, items[i]!)),
          "throw",
        );
        this.spent.items += batch.length;
        this.spent.tokens += stats.realTokens;
        this.spent.modelCpuMs += stats.cpuMs ?? 0;
        let failed = 0;
        batch.forEach((itemIndex, j) => {
          outcomes[itemIndex] = out[j]!;
          if (!out[j]!.ok) failed++;
        });
        // Progress moves per model call, not per shard: shards can take minutes.
        this.opts.progress?.advance(batch.length - failed, failed);
        this.opts.events?.emit("microbatch.inferred", {
          size: batch.length,
          inferenceMs: stats.inferenceMs,
          realTokens: stats.realTokens,
          paddedTokens: stats.paddedTokens,
          ...(stats.cpuMs === undefined ? {} : { cpuMs: stats.cpuMs }),
          expired: 0,
          failed,
        });
      },
    });
    for (const batch of batches) runner.push(batch);
    await runner.whenIdle();
    if (failure) throw failure.error;
    return outcomes;
  }
}
