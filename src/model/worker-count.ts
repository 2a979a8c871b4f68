import { availableParallelism } from "node:os";

/** `model.workers`: a count, or `auto`. */
export type WorkerCount = number | "auto";

/**
 * The one home of the `auto` rule (docs/configuration.md, `model.workers`): available cores − 1, at
 * least 1, so one core stays free for Kafka I/O, tokenising and encoding. `cores` is for tests.
 */
export function resolveWorkerCount(workers: WorkerCount, cores = availableParallelism()): number {
  if (workers !== "auto") return workers;
  return Math.max(1, cores - 1);
}
