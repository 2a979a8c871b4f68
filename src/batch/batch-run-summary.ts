import type { BatchManifest } from "./batch-manifest.js";

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
  totals: BatchManifest["totals"];
  message: string;
}
