import { randomBytes } from "node:crypto";
import { mkdir, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { SluiceEvents } from "../events/sluice-events.js";
import { InFlightRunner } from "../microbatch/in-flight-runner.js";
import { type ItemOutcome, type ModelPort, runBatch } from "../model/model-port.js";
import { SluiceError } from "../sluice-error.js";
import { writeFileAtomic } from "./atomic-file.js";
import {
  assertSameRun,
  type BatchManifest,
  hashConfig,
  type InputDescription,
  MANIFEST_FORMAT_VERSION,
  type ModelDescription,
  type RetryRound,
  readManifest,
  type ShardRecord,
  sluiceProvenance,
  writeManifest,
} from "./batch-manifest.js";
import type { BatchProgressSink } from "./batch-progress-sink.js";
import type { BatchRunSummary } from "./batch-run-summary.js";
import type { BatchResultRow, BatchSink } from "./batch-sink.js";
import type { BatchItem, BatchSource } from "./batch-source.js";
import { RunLock } from "./run-lock.js";

export const FAILURES_FILE = "failures.jsonl";
const FAILURES_DIR = "failures";

export type BatchRunMode = "resume" | "new-run" | "retry-failed";

export interface BatchJobOptions {
  source: BatchSource;
  sink: BatchSink;
  model: ModelPort;
  /** Directory of manifest.json, failures.jsonl and failures/ (for file outputs: the output dir). */
  stateDir: string;
  /** Rows per shard, the unit of checkpointing. Default 10_000. */
  shardSize?: number;
  /** Items per model call; fixed-size batches, no wait timer (throughput-bound). Default 32. */
  batchSize?: number;
  /** Model calls in flight at once, so a worker pool stays busy. Default 2. */
  maxInFlightBatches?: number;
  /** Sort a shard's items by token count before batching (less padding); output order stays input order. Default true. */
  sortByLength?: boolean;
  /** Settings that change output bytes; hashed into the manifest (tokenisation, truncation, pooling, task, prefix…). */
  outputConfig: Record<string, unknown>;
  /** SHA-256 of the tokenizer file. Default: `model.tokenizerHash`, else null. */
  tokenizerHash?: string | null;
  /** resume (default): continue or no-op; new-run: discard the old run here; retry-failed: reprocess failures. */
  mode?: BatchRunMode;
  /** Progress counts (the CLI shows them as a bar or plain lines). Default: none. */
  progress?: BatchProgressSink;
  events?: SluiceEvents;
}

interface FailureRecord {
  id: string;
  row: number;
  code: string;
  message: string;
}

/**
 * The offline job: reads a source in shards, runs fixed-size batches through the model, writes each shard
 * atomically through the sink and checkpoints it in the manifest (docs/batch-mode.md).
 */
export class BatchJob {
  private readonly opts: Required<Omit<BatchJobOptions, "progress" | "events" | "tokenizerHash">> &
    Pick<BatchJobOptions, "progress" | "events">;
  private readonly tokenizerHash: string | null;
  private readonly stateDir: string;
  private manifest!: BatchManifest;
  private runStartedMs = 0;
  private stopRequested = false;
  private previousWallMs = 0;

  constructor(opts: BatchJobOptions) {
    const shardSize = opts.shardSize ?? 10_000;
    const batchSize = opts.batchSize ?? 32;
    const maxInFlightBatches = opts.maxInFlightBatches ?? 2;
    for (const [name, v] of [
      ["shardSize", shardSize],
      ["batchSize", batchSize],
      ["maxInFlightBatches", maxInFlightBatches],
    ] as const) {
      if (!Number.isInteger(v) || v <= 0) {
        throw new SluiceError("CONFIG_INVALID", `batch ${name} must be a positive integer, got ${v}`);
      }
    }
    this.opts = {
      ...opts,
      shardSize,
      batchSize,
      maxInFlightBatches,
      sortByLength: opts.sortByLength ?? true,
      mode: opts.mode ?? "resume",
    };
    this.tokenizerHash = opts.tokenizerHash ?? opts.model.tokenizerHash ?? null;
    this.stateDir = resolve(opts.stateDir);
  }

  /** Asks the job to stop after the shard in progress (e.g. on SIGINT); `run()` then resolves "interrupted". */
  stop(): void {
    this.stopRequested = true;
  }

  async run(): Promise<BatchRunSummary> {
    this.runStartedMs = Date.now();
    await mkdir(join(this.stateDir, FAILURES_DIR), { recursive: true });
    const lock = await RunLock.acquire(this.stateDir);
    try {
      return await this.runLocked();
    } finally {
      await lock.release();
    }
  }

  private async runLocked(): Promise<BatchRunSummary> {
    await this.opts.sink.prepare();
    let existing = await readManifest(this.stateDir);
    const input = await this.opts.source.describe(existing?.input);
    const model: ModelDescription = {
      name: this.opts.model.identity.name,
      version: this.opts.model.identity.version,
      task: this.opts.model.task,
      tokenizerHash: this.tokenizerHash,
    };
    // Batch composition can change the last bits of float outputs, so it is part of the output config.
    const config = {
      ...this.opts.outputConfig,
      batching: { batchSize: this.opts.batchSize, sortByLength: this.opts.sortByLength },
    };
    const configHash = hashConfig(config);
    const output = { uri: this.opts.sink.uri, format: this.opts.sink.format };
    const current = {
      input,
      model,
      configHash,
      config,
      shardSize: this.opts.shardSize,
      output,
    };
    if (existing && this.opts.mode === "new-run") {
      await this.discard(existing);
      existing = null;
    }
    if (existing) {
      assertSameRun(existing, current, this.stateDir);
      this.manifest = existing;
      this.previousWallMs = existing.totals.wallMs;
    } else {
      const now = new Date().toISOString();
      this.manifest = {
        formatVersion: MANIFEST_FORMAT_VERSION,
        runId: newRunId(),
        status: "running",
        createdAt: now,
        updatedAt: now,
        sluice: sluiceProvenance(),
        ...current,
        shards: [],
        retries: [],
        inFlight: null,
        totals: { rows: 0, ok: 0, failed: 0, shardsComplete: 0, wallMs: 0 },
      };
      await this.save();
    }
    this.opts.sink.bindRun?.(this.manifest.runId);
    if (this.manifest.inFlight) await this.recoverInFlight();

    const wasComplete = this.manifest.status === "complete";
    if (wasComplete && this.opts.mode !== "retry-failed") {
      return this.summary("nothing-to-do", { ok: 0, skipped: this.manifest.totals.rows, shards: 0 });
    }
    let ok = 0;
    let skipped = 0;
    let shards = 0;
    if (!wasComplete) {
      const r = await this.runMainShards();
      ok += r.ok;
      skipped += r.skipped;
      shards += r.shards;
      if (r.interrupted) return this.summary("interrupted", { ok, skipped, shards });
    }
    if (this.opts.mode === "retry-failed") {
      const r = await this.runRetryRound();
      if (r === null && shards === 0) {
        return this.summary("nothing-to-do", { ok: 0, skipped: this.manifest.totals.rows, shards: 0 });
      }
      if (r) {
        ok += r.ok;
        shards += r.shards;
        if (r.interrupted) return this.summary("interrupted", { ok, skipped, shards });
      }
      return this.summary("retried", { ok, skipped, shards });
    }
    return this.summary("ran", { ok, skipped, shards });
  }

  // ---------------------------------------------------------------- main pass

  private async runMainShards(): Promise<{
    ok: number;
    skipped: number;
    shards: number;
    interrupted: boolean;
  }> {
    const S = this.opts.shardSize;
    const done = new Set(this.manifest.shards.map((s) => s.key));
    const skippedRows = this.manifest.shards.reduce((n, s) => n + s.rows, 0);
    this.opts.progress?.start({ totalRows: expectedRows(this.manifest.input), doneRows: skippedRows });
    let ok = 0;
    let shards = 0;
    let rows = 0;
    let current = -1;
    let pending: BatchItem[] = [];
    const flush = async () => {
      if (pending.length === 0) return;
      const key = mainKey(current);
      const record = await this.processUnit(key, current * S, current * S + pending.length, pending, null);
      ok += record.ok;
      shards++;
      pending = [];
    };
    for await (const item of this.opts.source.items()) {
      rows++;
      const shard = Math.floor(item.row / S);
      if (shard !== current) {
        await flush();
        current = shard;
      }
      if (this.stopRequested && shards > 0) break;
      if (done.has(mainKey(shard))) continue;
      pending.push(item);
      if (pending.length === S) await flush();
    }
    // Leaving the loop early returns the source's iterator, which closes a topic reader.
    if (this.stopRequested && shards > 0) {
      this.updateTotals();
      await this.save();
      return { ok, skipped: skippedRows, shards, interrupted: true };
    }
    await flush();
    this.manifest.status = "complete";
    if (this.manifest.input.kind === "kafka") this.manifest.input.rows = rows;
    this.updateTotals();
    await this.save();
    await this.writeFailuresSummary();
    return { ok, skipped: skippedRows, shards, interrupted: false };
  }

  // ---------------------------------------------------------------- retries

  /** Returns null when there was nothing to retry. */
  private async runRetryRound(): Promise<{ ok: number; shards: number; interrupted: boolean } | null> {
    const open = await this.openFailures();
    let round = this.manifest.retries.at(-1);
    if (!round || round.complete) {
      if (open.size === 0) return null;
      round = {
        round: (round?.round ?? 0) + 1,
        rowsAttempted: open.size,
        shards: [],
        complete: false,
        startedAt: new Date().toISOString(),
        finishedAt: null,
      };
      this.manifest.retries.push(round);
      await this.save();
    }
    const S = this.opts.shardSize;
    const sortedRows = [...open.keys()].sort((a, b) => a - b);
    const position = new Map(sortedRows.map((row, i) => [row, i]));
    const done = new Set(round.shards.map((s) => s.key));
    const alreadyDone = round.shards.reduce((n, s) => n + s.rows, 0);
    this.opts.progress?.start({ totalRows: sortedRows.length, doneRows: alreadyDone });
    let ok = 0;
    let shards = 0;
    let current = -1;
    let pending: BatchItem[] = [];
    const flush = async () => {
      if (pending.length === 0) return;
      const key = retryKey(round.round, current);
      const record = await this.processUnit(key, current * S, current * S + pending.length, pending, round);
      ok += record.ok;
      shards++;
      pending = [];
    };
    for await (const item of this.opts.source.items()) {
      const pos = position.get(item.row);
      if (pos === undefined) continue;
      const failure = open.get(item.row)!;
      if (failure.id !== item.id) {
        throw new SluiceError(
          "MANIFEST_MISMATCH",
          `row ${item.row} has id "${item.id}" but failures list "${failure.id}"; the input changed: start a new run with --new-run`,
        );
      }
      const unit = Math.floor(pos / S);
      if (unit !== current) {
        await flush();
        current = unit;
      }
      if (this.stopRequested && shards > 0) break;
      if (done.has(retryKey(round.round, unit))) continue;
      pending.push(item);
    }
    if (this.stopRequested && shards > 0) {
      this.updateTotals();
      await this.save();
      return { ok, shards, interrupted: true };
    }
    await flush();
    round.complete = true;
    round.finishedAt = new Date().toISOString();
    this.updateTotals();
    await this.save();
    await this.writeFailuresSummary();
    return { ok, shards, interrupted: false };
  }

  /**
   * Failures still open: those of the main shards, or, once a retry round completed, that round's
   * failures (a round retries every open failure, so its failure files replace the earlier ones).
   */
  private async openFailures(): Promise<Map<number, FailureRecord>> {
    const lastComplete = [...this.manifest.retries].reverse().find((r) => r.complete);
    const shards = lastComplete ? lastComplete.shards : this.manifest.shards;
    const open = new Map<number, FailureRecord>();
    for (const s of shards) {
      if (!s.failuresFile) continue;
      const text = await readFile(join(this.stateDir, s.failuresFile), "utf8");
      for (const line of text.split("\n")) {
        if (!line) continue;
        const f = JSON.parse(line) as FailureRecord;
        open.set(f.row, f);
      }
    }
    return open;
  }

  // ---------------------------------------------------------------- one shard

  private async processUnit(
    key: string,
    rowStart: number,
    rowEnd: number,
    items: BatchItem[],
    round: RetryRound | null,
  ): Promise<ShardRecord> {
    const startedMs = Date.now();
    const startedAt = new Date(startedMs).toISOString();
    const failures: FailureRecord[] = [];
    const runnable: BatchItem[] = [];
    for (const item of items) {
      if (item.error) failures.push({ id: item.id, row: item.row, ...item.error });
      else runnable.push(item);
    }
    if (failures.length > 0) this.opts.progress?.advance(0, failures.length);
    const outcomes = await this.infer(runnable);
    const rows: BatchResultRow[] = [];
    const identity = { name: this.opts.model.identity.name, version: this.opts.model.identity.version };
    runnable.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) {
        rows.push({
          id: item.id,
          row: item.row,
          status: "ok",
          output: outcome.output,
          model: identity,
          truncated: outcome.truncated,
          attributes: item.attributes,
          source: item.source
            ? { topic: item.source.topic, partition: item.source.partition, offset: item.source.offset }
            : null,
        });
      } else failures.push({ id: item.id, row: item.row, code: outcome.code, message: outcome.message });
    });
    failures.sort((a, b) => a.row - b.row);

    // Failures first: a crash after this but before the manifest update just rewrites the same file.
    let failuresFile: string | null = null;
    if (failures.length > 0) {
      failuresFile = `${FAILURES_DIR}/${key}.jsonl`;
      await writeFileAtomic(
        join(this.stateDir, failuresFile),
        failures
          .map((f) => `${JSON.stringify({ id: f.id, row: f.row, code: f.code, message: f.message })}\n`)
          .join(""),
      );
    }
    const record: ShardRecord = {
      key,
      rowStart,
      rowEnd,
      rows: items.length,
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
      const inFlight = await this.opts.sink.beginShard(key);
      this.manifest.inFlight = { ...inFlight, round: round?.round ?? null, pending: { ...record } };
      await this.save();
    }
    const written = await this.opts.sink.writeShard(key, rows);
    const finishedMs = Date.now();
    record.output = written.output;
    record.sha256 = written.sha256;
    record.finishedAt = new Date(finishedMs).toISOString();
    record.durationMs = finishedMs - startedMs;
    (round ? round.shards : this.manifest.shards).push(record);
    this.manifest.inFlight = null;
    this.updateTotals();
    await this.save();
    return record;
  }

  /** Runs fixed-size batches (optionally length-sorted) with a bounded number in flight; input order kept. */
  private async infer(items: BatchItem[]): Promise<ItemOutcome[]> {
    const outcomes: ItemOutcome[] = new Array(items.length);
    if (items.length === 0) return outcomes;
    let order = items.map((_, i) => i);
    if (this.opts.sortByLength) {
      const tokens = items.map((it) =>
        typeof it.text === "string" ? this.opts.model.countTokens(it.text) : 0,
      );
      // Stable on ties (index), so the batch composition and therefore the output bytes are deterministic.
      order = order.sort((a, b) => tokens[a]! - tokens[b]! || a - b);
    }
    const batches: number[][] = [];
    for (let i = 0; i < order.length; i += this.opts.batchSize)
      batches.push(order.slice(i, i + this.opts.batchSize));
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
          this.opts.model,
          batch.map((i) => items[i]!.text),
          "throw",
        );
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

  // ---------------------------------------------------------------- crash recovery, bookkeeping

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
    this.updateTotals();
    await this.save();
  }

  private async discard(old: BatchManifest): Promise<void> {
    const all = [...old.shards, ...old.retries.flatMap((r) => r.shards)];
    if (old.inFlight) all.push(old.inFlight.pending);
    for (const s of all) {
      if (s.sha256 !== null) await this.opts.sink.removeOutput?.(s.output);
      if (s.failuresFile) await rm(join(this.stateDir, s.failuresFile), { force: true });
    }
    await rm(join(this.stateDir, FAILURES_FILE), { force: true });
  }

  private updateTotals(): void {
    const m = this.manifest;
    const retryShards = m.retries.flatMap((r) => r.shards);
    const ok = [...m.shards, ...retryShards].reduce((n, s) => n + s.ok, 0);
    const lastComplete = [...m.retries].reverse().find((r) => r.complete);
    const baseFailed = (lastComplete ? lastComplete.shards : m.shards).reduce((n, s) => n + s.failures, 0);
    const open = m.retries.at(-1);
    const recoveredInOpenRound = open && !open.complete ? open.shards.reduce((n, s) => n + s.ok, 0) : 0;
    m.totals = {
      rows: m.shards.reduce((n, s) => n + s.rows, 0),
      ok,
      failed: baseFailed - recoveredInOpenRound,
      shardsComplete: m.shards.length,
      wallMs: this.previousWallMs + (Date.now() - this.runStartedMs),
    };
  }

  /** Rewrites failures.jsonl from the per-shard failure files: every open failure once, by row. */
  private async writeFailuresSummary(): Promise<void> {
    const open = await this.openFailures();
    const lines = [...open.values()]
      .sort((a, b) => a.row - b.row)
      .map((f) => `${JSON.stringify({ id: f.id, row: f.row, code: f.code, message: f.message })}\n`);
    await writeFileAtomic(join(this.stateDir, FAILURES_FILE), lines.join(""));
  }

  private async save(): Promise<void> {
    await writeManifest(this.stateDir, this.manifest);
  }

  private summary(
    action: BatchRunSummary["action"],
    r: { ok: number; skipped: number; shards: number },
  ): BatchRunSummary {
    const wallMs = Date.now() - this.runStartedMs;
    const t = this.manifest.totals;
    const processed = action === "nothing-to-do" ? 0 : r.ok;
    const summary: BatchRunSummary = {
      runId: this.manifest.runId,
      action,
      rowsOk: processed,
      rowsFailed: t.failed,
      rowsSkipped: r.skipped,
      shardsWritten: r.shards,
      wallMs,
      rowsPerSec: wallMs > 0 ? (processed * 1000) / wallMs : 0,
      totals: t,
      message: "",
    };
    summary.message =
      action === "interrupted"
        ? `run ${this.manifest.runId} stopped on request after ${r.shards} shard(s) (${processed} rows ok); run the same command to resume.`
        : action === "nothing-to-do"
          ? `run ${this.manifest.runId} is already complete (${t.ok} ok, ${t.failed} failed); nothing to do.` +
            (this.opts.mode === "retry-failed"
              ? " No failures are left to retry."
              : t.failed > 0
                ? " Use --retry-failed to retry the failures, or --new-run to start over."
                : " Use --new-run to start over.")
          : `run ${this.manifest.runId}: ${processed} rows ok, ${t.failed} failed (open), ${r.skipped} skipped (done earlier), ` +
            `${r.shards} shard(s) written in ${(wallMs / 1000).toFixed(1)} s (${summary.rowsPerSec.toFixed(1)} rows/s)`;
    this.opts.progress?.finish(summary);
    return summary;
  }
}

export function mainKey(shard: number): string {
  return `part-${String(shard).padStart(5, "0")}`;
}

export function retryKey(round: number, unit: number): string {
  return `retry-${String(round).padStart(2, "0")}-part-${String(unit).padStart(5, "0")}`;
}

function expectedRows(input: InputDescription): number | null {
  if (input.kind === "file") return input.rows;
  if (input.rows !== null) return input.rows;
  // Upper bound: control records and aborted records take offsets too.
  return input.ranges.reduce((n, r) => n + Number(BigInt(r.endOffset) - BigInt(r.startOffset)), 0);
}

function newRunId(): string {
  const stamp = new Date()
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  return `${stamp}-${randomBytes(3).toString("hex")}`;
}
