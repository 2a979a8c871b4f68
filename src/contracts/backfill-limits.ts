/**
 * How much the backfill lane may use now: the SLO guard's levers (docs/lanes.md, "The levers"), one
 * value per lever. The guard's levers table (`LEVERS` in src/processor/backfill-guard.ts) is the one
 * place that makes them, already within the ranges below, and `BackfillThrottle` hands each part its
 * lever as it is: the batcher, the model, the committers and the fetches take it without clamping.
 * A contract between the processor, which decides, and the model, which yields, so it lives where
 * both can import it.
 */
export interface BackfillLimits {
  /** Backfill batches in flight at once (LaneBatcher slots), an integer ≥ 0; 0 = no new backfill batch forms. */
  batchSlots: number;
  /**
   * Share of each worker's time that backfill ORT calls may take, in [0, 1] (a duty cycle: after a
   * backfill call of d ms the worker waits d × (1 − share) ÷ share before its next one). 1 = no gap.
   */
  workerShare: number;
  /** Backfill calls a worker may hold at once, an integer from 0 (none) to the jobs a worker holds (2). */
  workerDepth: number;
  /** Backfill slices' time budget, as a share of `model.backfillSliceMs`, in [0, 1]. */
  sliceShare: number;
  /**
   * Share of the backfill lane's CPU budget (`lanes.backfillCpuCores`) it may use now, in [0, 1].
   * The budget counts the model's backfill calls and the main thread's work for backfill records.
   */
  cpuShare: number;
  /**
   * Backfill partitions commit every `lanes.backfillCommitIntervalMs` ÷ this, in [0.25, 1]: at most
   * four intervals apart, never held.
   */
  commitShare: number;
  /** Backfill fetches paused. */
  fetchPaused: boolean;
}

/**
 * What the model takes of the limits (ModelPort.limitBackfill): the levers on its backfill calls, and
 * the CPU its backfill calls may use now, in cores (the lane's budget × `cpuShare`, less what the
 * main thread spends on backfill records; Infinity = no budget). Made by `BackfillThrottle`.
 */
export type ModelBackfillLimits = Pick<BackfillLimits, "workerShare" | "workerDepth" | "sliceShare"> & {
  cpuCores: number;
};
