import { cpuLimit } from "./cpu-limit.js";

/** `model.workers`: a count, or `auto`. */
export type WorkerCount = number | "auto";

/**
 * The one home of the `auto` rule (docs/configuration.md, `model.workers`): the cores this process
 * really has − 1, at least 1, so one core stays free for Kafka I/O, tokenising and encoding. "Really
 * has" is the smaller of the affinity mask and the cgroup CPU quota (src/model/cpu-limit.ts), so a
 * pod with `limits.cpu: 2` on a 32-core node starts 1 worker, not 31. `cores` is for tests.
 */
export function resolveWorkerCount(workers: WorkerCount, cores = cpuLimit().cores): number {
  if (workers !== "auto") return workers;
  return Math.max(1, cores - 1);
}

/**
 * The one home of `model.backfillWorkers: auto` (docs/lanes.md, "Backfill workers"): as many
 * backfill workers as online ones when the instance has a backfill lane, else none. 0 = backfill
 * calls share the online workers.
 */
export function resolveBackfillWorkerCount(
  backfillWorkers: WorkerCount,
  onlineWorkers: number,
  backfillLane: boolean,
): number {
  if (backfillWorkers !== "auto") return backfillWorkers;
  return backfillLane ? onlineWorkers : 0;
}
