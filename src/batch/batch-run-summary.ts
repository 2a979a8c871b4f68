import { formatRunCost } from "../runs/run-cost.js";
import type { BatchRunCost, RunTotals } from "./batch-manifest.js";

/** What one `BatchJob.run()` did, and the run's totals so far. */
export interface BatchRunSummary {
  runId: string;
  /**
   * nothing-to-do: the run was already complete (or had no failures to retry); interrupted: `stop()` was
   * called and the job stopped after the shard in progress (rerun to resume).
   */
  action: "ran" | "retried" | "nothing-to-do" | "interrupted";
  rowsOk: number;
  rowsFailed: number;
  /** Rows of shards that an earlier invocation had already completed. */
  rowsSkipped: number;
  shardsWritten: number;
  wallMs: number;
  rowsPerSec: number;
  /** Whole-run totals from the manifest. */
  totals: RunTotals;
  /** Whole-run cost from the manifest (absent before the first shard). */
  cost?: BatchRunCost;
  message: string;
}

/** What an invocation did, as counted by the job. */
export interface BatchRunCounts {
  runId: string;
  action: BatchRunSummary["action"];
  /** Rows ok, rows of earlier invocations' shards, and shards written by this invocation. */
  ok: number;
  skipped: number;
  shards: number;
  /** This invocation's wall time. */
  wallMs: number;
  totals: RunTotals;
  cost?: BatchRunCost;
  /** The invocation was a --retry-failed one (changes the hint of a nothing-to-do message). */
  retryFailed: boolean;
}

/** The summary and its one-line message (what the CLI prints at the end). Pure. */
export function summarizeBatchRun(c: BatchRunCounts): BatchRunSummary {
  const t = c.totals;
  const processed = c.action === "nothing-to-do" ? 0 : c.ok;
  const rowsPerSec = c.wallMs > 0 ? (processed * 1000) / c.wallMs : 0;
  const message =
    c.action === "interrupted"
      ? `run ${c.runId} stopped on request after ${c.shards} shard(s) (${processed} rows ok); run the same command to resume.`
      : c.action === "nothing-to-do"
        ? `run ${c.runId} is already complete (${t.ok} ok, ${t.failed} failed); nothing to do.` +
          (c.retryFailed
            ? " No failures are left to retry."
            : t.failed > 0
              ? " Use --retry-failed to retry the failures, or --new-run to start over."
              : " Use --new-run to start over.")
        : `run ${c.runId}: ${processed} rows ok, ${t.failed} failed (open), ${c.skipped} skipped (done earlier), ` +
          `${c.shards} shard(s) written in ${(c.wallMs / 1000).toFixed(1)} s (${rowsPerSec.toFixed(1)} rows/s)` +
          (c.cost ? `; run ${formatRunCost(c.cost)}` : "");
  return {
    runId: c.runId,
    action: c.action,
    rowsOk: processed,
    rowsFailed: t.failed,
    rowsSkipped: c.skipped,
    shardsWritten: c.shards,
    wallMs: c.wallMs,
    rowsPerSec,
    totals: t,
    ...(c.cost ? { cost: c.cost } : {}),
    message,
  };
}
