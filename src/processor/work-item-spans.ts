import type { PartitionTask } from "./partition-task.js";
import type { WorkItem } from "./request-intake.js";

/**
 * Why the processor gave a request up before its commit, as the code its span ends with
 * (docs/observability.md, "Tracing"): the records are read again by whoever owns the partition next.
 */
export const GIVEN_UP = {
  /** The group gave the partition to another member. */
  revoked: "PARTITION_REVOKED",
  /** A failed or fenced transaction voided the partition's work; it is reclaimed from its commit. */
  reset: "PARTITION_RESET",
  /** The process is stopping: fetched records not started are left to the next owner. */
  shutdown: "SHUTDOWN",
} as const;

/** The code for an item of `task` taken at `generation` that is given up now. */
export function givenUpCode(task: PartitionTask, generation: number): string {
  if (task.state === "revoked") return GIVEN_UP.revoked;
  if (task.state === "restoring" || generation !== task.generation) return GIVEN_UP.reset;
  return GIVEN_UP.shutdown;
}

/** Ends the spans of `items` whose work is void (their task was reset, revoked or closed). */
export function abortVoid(items: readonly WorkItem[]): void {
  for (const item of items) {
    if (!item.task.isCurrent(item.generation)) item.span.abort(givenUpCode(item.task, item.generation));
  }
}

/** Ends the spans of `items`, all given up (dropped from the batcher, left at shutdown). */
export function abortAll(items: readonly WorkItem[]): void {
  for (const item of items) item.span.abort(givenUpCode(item.task, item.generation));
}
