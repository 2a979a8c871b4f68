import type { BatchRunSummary } from "./batch-run-summary.js";

/**
 * Where the batch job reports progress while it runs. The job only counts; how progress is shown (a
 * terminal bar, plain lines, nothing) is the caller's choice: the CLI supplies `BatchProgressBar`.
 */
export interface BatchProgressSink {
  /** `totalRows` null when unknown; `doneRows` were completed by an earlier invocation. */
  start(info: { totalRows: number | null; doneRows: number }): void;
  /** Called after every model call (and for rows that fail before one), with that call's counts. */
  advance(ok: number, failed: number): void;
  finish(summary: BatchRunSummary): void;
}
