/**
 * One instance's share of a backfill run's cost, written to the runs topic (`topics.runs`) in the
 * same transaction as the run's results it accounts for (src/delivery/partition-committer.ts): a
 * committed share counts once, an aborted one is invisible to `read_committed` readers and its rows
 * are re-done, and counted, by whichever instance processes them next. Wire format: JSON.
 */
export interface RunCostShare {
  kind: "sluice.run-cost-share";
  runId: string;
  /** Input (backfill) topic and partition of the rows; with `nextOffset` the share's unique key. */
  topic: string;
  partition: number;
  /** The transaction's consumer offset (last covered offset + 1). */
  nextOffset: string;
  /** Rows of the run in the transaction that the model ran (or tried to). */
  items: number;
  /** Real tokens of those rows. */
  tokens: number;
  /** Their share of the worker threads' model CPU, ms. */
  modelCpuMs: number;
}

/** Key prefix of share records; a manifest's key is the bare run id, so the two never collide. */
export const RUN_COST_KEY_PREFIX = "cost/";

/** `cost/<runId>/<topic>/<partition>/<nextOffset>`: unique per committed transaction. */
export function runCostShareKey(
  s: Pick<RunCostShare, "runId" | "topic" | "partition" | "nextOffset">,
): string {
  return `${RUN_COST_KEY_PREFIX}${s.runId}/${s.topic}/${s.partition}/${s.nextOffset}`;
}

export function encodeRunCostShare(share: RunCostShare): string {
  return JSON.stringify(share);
}

/** The share in `value`, or null when the record is not one (a manifest, a tombstone, garbage). */
export function decodeRunCostShare(value: Buffer | string | null): RunCostShare | null {
  if (value === null) return null;
  try {
    const v = JSON.parse(value.toString()) as Partial<RunCostShare>;
    if (v.kind !== "sluice.run-cost-share" || typeof v.runId !== "string") return null;
    if (typeof v.items !== "number" || typeof v.tokens !== "number" || typeof v.modelCpuMs !== "number")
      return null;
    return v as RunCostShare;
  } catch {
    return null;
  }
}
