import { resolve } from "node:path";
import type { SluiceEvents } from "../events/sluice-events.js";
import type { ModelPort } from "../model/model-port.js";
import type { RowSource } from "../runs/row-source.js";
import { addRunCostCounts, type CostPrices, type RunCostCounts, runCost } from "../runs/run-cost.js";
import { hashConfig, sluiceBuild } from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";
import {
  assertSameRun,
  type BatchManifest,
  costCounts,
  newBatchManifest,
  type RunIdentity,
  readManifest,
  runTotals,
  type ShardRecord,
  writeManifest,
} from "./batch-manifest.js";
import type { BatchProgressSink } from "./batch-progress-sink.js";
import { type BatchRunSummary, summarizeBatchRun } from "./batch-run-summary.js";
import type { BatchSink } from "./batch-sink.js";
import { FailureLedger } from "./failure-ledger.js";
import { RunLock } from "./run-lock.js";
import { runShardLoop, type ShardLoopResult, type ShardUnit } from "./shard-loop.js";
import { mainPass, retryPass, retryRoundToRun, type ShardPass } from "./shard-pass.js";
import { ShardScorer } from "./shard-scorer.js";

export type BatchRunMode = "resume" | "new-run" | "retry-failed";

/**
 * Resolved options: every value is decided by the composition root (src/app/batch-runtime.ts) from the
 * configuration and the CLI flags, which hold the defaults (docs/batch-mode.md); the job has none.
 */
export interface BatchJobOptions {
  source: RowSource;
  sink: BatchSink;
  model: ModelPort;
  /** Directory of manifest.json, failures.jsonl and failures/ (for file outputs: the output dir). */
  stateDir: string;
  /** Rows per shard, the unit of checkpointing. */
  shardSize: number;
  /** Items per model call; fixed-size batches, no wait timer (throughput-bound). */
  batchSize: number;
  /** Model calls in flight at once, so a worker pool stays busy. */
  maxInFlightBatches: number;
  /** Sort a shard's items by token count before batching (less padding); output order stays input order. */
  sortByLength: boolean;
  /** Settings that change output bytes; hashed into the manifest (tokenisation, truncation, pooling, task, prefix…). */
  outputConfig: Record<string, unknown>;
  /** resume: continue or no-op; new-run: discard the old run here; retry-failed: reprocess failures. */
  mode: BatchRunMode;
  /** Progress counts (the CLI shows them as a bar or plain lines). */
  progress?: BatchProgressSink;
  events?: SluiceEvents;
  /** `cost.*` prices; default none (no money figures), per 1k tokens on. */
  prices?: CostPrices;
  /**
   * The process's cumulative CPU ms (all threads). Default `process.cpuUsage()`, counted from
   * `processCpuBaselineMs`.
   */
  processCpuMs?: () => number;
  /**
   * Process CPU that is not this run's: 0 when the process exists for this run (the CLI: start-up and
   * model load count), default the CPU already spent when `run()` starts.
   */
  processCpuBaselineMs?: number;
}

const processCpuUsageMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * The offline job: reads a source in shards, scores them, writes each shard atomically through the sink
 * and checkpoints it in the manifest (docs/batch-mode.md). The main pass and retry rounds run through
 * the same shard loop (./shard-loop.ts); this class opens the run, picks the passes and records units.
 */
export class BatchJob {
  private readonly opts: BatchJobOptions;
  private readonly stateDir: string;
  private readonly ledger: FailureLedger;
  private readonly scorer: ShardScorer;
  private manifest!: BatchManifest;
  private runStartedMs = 0;
  private stopRequested = false;
  private previousWallMs = 0;
  private previousCost: RunCostCounts = costCounts(undefined);
  private shardsWritten = 0;
  private cpuBaselineMs = 0;

  constructor(opts: BatchJobOptions) {
    for (const name of ["shardSize", "batchSize", "maxInFlightBatches"] as const) {
      const v = opts[name];
      if (!Number.isInteger(v) || v <= 0) {
        throw new SluiceError("CONFIG_INVALID", `batch ${name} must be a positive integer, got ${v}`);
      }
    }
    this.opts = opts;
    this.stateDir = resolve(opts.stateDir);
    this.ledger = new FailureLedger(this.stateDir);
    const { model, batchSize, maxInFlightBatches, sortByLength, progress, events } = opts;
    this.scorer = new ShardScorer({ model, batchSize, maxInFlightBatches, sortByLength, progress, events });
  }

  /** Asks the job to stop after the shard in progress (e.g. on SIGINT); `run()` then resolves "interrupted". */
  stop(): void {
    this.stopRequested = true;
  }

  async run(): Promise<BatchRunSummary> {
    this.runStartedMs = Date.now();
    this.cpuBaselineMs = this.opts.processCpuBaselineMs ?? this.processCpuMs();
    await this.ledger.prepare();
    const lock = await RunLock.acquire(this.stateDir);
    try {
      return await this.runLocked();
    } finally {
      await lock.release();
    }
  }

  private async runLocked(): Promise<BatchRunSummary> {
    await this.opts.sink.prepare();
    await this.openRun();
    const retryFailed = this.opts.mode === "retry-failed";
    const wasComplete = this.manifest.status === "complete";
    if (wasComplete && !retryFailed) return this.finish("nothing-to-do", this.nothingDone());
    const done = { ok: 0, skipped: 0, shards: 0 };
    if (!wasComplete) {
      const pass = mainPass(this.manifest, this.opts.shardSize);
      const r = await this.runPass(pass);
      done.ok += r.ok;
      done.skipped += pass.doneRows;
      done.shards += r.shards;
      if (r.interrupted) return this.finish("interrupted", done);
    }
    if (!retryFailed) return this.finish("ran", done);
    const open = await this.ledger.open(this.manifest);
    const round = retryRoundToRun(this.manifest, open.size);
    if (round === null) {
      return done.shards === 0
        ? this.finish("nothing-to-do", this.nothingDone())
        : this.finish("retried", done);
    }
    await this.save();
    const r = await this.runPass(retryPass(round, open, this.opts.shardSize));
    done.ok += r.ok;
    done.shards += r.shards;
    return this.finish(r.interrupted ? "interrupted" : "retried", done);
  }

  /** Loads the run recorded in the state dir (checking it is this run), or starts a new one. */
  private async openRun(): Promise<void> {
    let existing = await readManifest(this.stateDir);
    const identity = await this.runIdentity(existing);
    if (existing && this.opts.mode === "new-run") {
      await this.discard(existing);
      existing = null;
    }
    if (existing) {
      assertSameRun(existing, identity, this.stateDir);
      this.manifest = existing;
      this.previousWallMs = existing.totals.wallMs;
      this.previousCost = costCounts(existing.cost);
    } else {
      this.manifest = newBatchManifest(identity);
      await this.save();
    }
    this.opts.sink.bindRun?.(this.manifest.runId);
    if (this.manifest.inFlight) await this.recoverInFlight();
  }

  /** What this invocation would produce: input, model, output config, shard size and output. */
  private async runIdentity(existing: BatchManifest | null): Promise<RunIdentity> {
    const { model, sink } = this.opts;
    // Batch composition can change the last bits of float outputs, so it is part of the output config.
    const config = {
      ...this.opts.outputConfig,
      batching: { batchSize: this.opts.batchSize, sortByLength: this.opts.sortByLength },
    };
    return {
      sluice: sluiceBuild(),
      input: await this.opts.source.describe(existing?.input),
      model: {
        name: model.identity.name,
        version: model.identity.version,
        task: model.task,
        tokenizerHash: model.tokenizerHash ?? null,
      },
      configHash: hashConfig(config),
      config,
      shardSize: this.opts.shardSize,
      output: { uri: sink.uri, format: sink.format },
    };
  }

  /** Runs one pass through the shard loop; marks it complete when it was not interrupted. */
  private async runPass(pass: ShardPass): Promise<ShardLoopResult> {
    this.opts.progress?.start({ totalRows: pass.totalRows, doneRows: pass.doneRows });
    const result = await runShardLoop(pass, this.opts.shardSize, {
      items: () => this.opts.source.items(),
      processShard: (unit) => this.processShard(pass, unit),
      stopRequested: () => this.stopRequested,
    });
    if (!result.interrupted) pass.complete(result.rowsRead);
    await this.saveWithTotals();
    if (!result.interrupted) await this.ledger.writeSummary(this.manifest);
    return result;
  }

  /**
   * Scores a unit and makes it durable: failures file first (a crash before the manifest update just
   * rewrites it), then the sink's atomic write (for a topic: recorded as in flight before it commits),
   * then the unit's record in the manifest, which is what makes it done.
   */
  private async processShard(pass: ShardPass, unit: ShardUnit): Promise<ShardRecord> {
    const startedMs = Date.now();
    const startedAt = new Date(startedMs).toISOString();
    const { rows, failures } = await this.scorer.score(unit.items);
    const failuresFile = await this.ledger.writeShard(unit.name, failures);
    const record: ShardRecord = {
      key: unit.name,
      rowStart: unit.rowStart,
      rowEnd: unit.rowEnd,
      rows: unit.items.length,
      ok: rows.length,
      failures: failures.length,
      output: this.opts.sink.uri,
      sha256: null,
      failuresFile,
      startedAt,
      finishedAt: startedAt,
      durationMs: 0,
    };
    if (this.opts.sink.beginShard) {
      const inFlight = await this.opts.sink.beginShard(unit.name);
      this.manifest.inFlight = { ...inFlight, round: pass.round?.round ?? null, pending: { ...record } };
      await this.save();
    }
    const written = await this.opts.sink.writeShard(unit.name, rows, {
      // Rows the sink can never write (a topic's size limit) become failures of this shard, recorded
      // before its transaction commits, so a crash right after the commit recovers the right counts.
      beforeCommit: async (rejected) => {
        if (rejected.length === 0) return;
        const all = [...failures, ...rejected];
        record.failuresFile = await this.ledger.writeShard(unit.name, all);
        record.ok = rows.length - rejected.length;
        record.failures = all.length;
        if (this.manifest.inFlight) {
          this.manifest.inFlight.pending = { ...record };
          await this.save();
        }
      },
    });
    const finishedMs = Date.now();
    record.output = written.output;
    record.sha256 = written.sha256;
    record.finishedAt = new Date(finishedMs).toISOString();
    record.durationMs = finishedMs - startedMs;
    pass.records.push(record);
    this.shardsWritten++;
    this.manifest.inFlight = null;
    await this.saveWithTotals();
    return record;
  }

  /** A topic output's shard that was committing when the last invocation died: done, or to be redone. */
  private async recoverInFlight(): Promise<void> {
    const inFlight = this.manifest.inFlight!;
    if (!this.opts.sink.recoverInFlight) {
      this.manifest.inFlight = null;
      await this.save();
      return;
    }
    const { committed } = await this.opts.sink.recoverInFlight(inFlight);
    if (committed) {
      // The transaction committed but the manifest update was lost: the shard is done.
      const target =
        inFlight.round === null
          ? this.manifest.shards
          : this.manifest.retries.find((r) => r.round === inFlight.round)?.shards;
      if (target && !target.some((s) => s.key === inFlight.key)) target.push(inFlight.pending);
    }
    this.manifest.inFlight = null;
    await this.saveWithTotals();
  }

  /** --new-run: removes the old run's outputs and failure files here. */
  private async discard(old: BatchManifest): Promise<void> {
    const all = [...old.shards, ...old.retries.flatMap((r) => r.shards)];
    if (old.inFlight) all.push(old.inFlight.pending);
    for (const s of all) {
      if (s.sha256 !== null) await this.opts.sink.removeOutput?.(s.output);
    }
    await this.ledger.discard(all);
  }

  private async saveWithTotals(): Promise<void> {
    this.manifest.totals = runTotals(this.manifest, this.previousWallMs + (Date.now() - this.runStartedMs));
    // An invocation that wrote nothing adds nothing (not even its start-up).
    if (this.shardsWritten > 0) {
      const { spent } = this.scorer;
      const now: RunCostCounts = {
        ...spent,
        processCpuMs: Math.max(0, this.processCpuMs() - this.cpuBaselineMs),
        wallMs: Date.now() - this.runStartedMs,
      };
      this.manifest.cost = {
        ...runCost(addRunCostCounts(this.previousCost, now), this.opts.prices ?? { tokens: true }),
        modelCpuSource: this.opts.model.cpuSource ?? null,
      };
    }
    await this.save();
  }

  private processCpuMs(): number {
    return (this.opts.processCpuMs ?? processCpuUsageMs)();
  }

  private async save(): Promise<void> {
    await writeManifest(this.stateDir, this.manifest);
  }

  private nothingDone(): { ok: number; skipped: number; shards: number } {
    return { ok: 0, skipped: this.manifest.totals.rows, shards: 0 };
  }

  private finish(
    action: BatchRunSummary["action"],
    done: { ok: number; skipped: number; shards: number },
  ): BatchRunSummary {
    const summary = summarizeBatchRun({
      runId: this.manifest.runId,
      action,
      ...done,
      wallMs: Date.now() - this.runStartedMs,
      totals: this.manifest.totals,
      ...(this.manifest.cost ? { cost: this.manifest.cost } : {}),
      retryFailed: this.opts.mode === "retry-failed",
    });
    this.opts.progress?.finish(summary);
    return summary;
  }
}
