import { headerValue, type RecordHeaders } from "./codec.js";

/**
 * The two lanes of `sluice serve` (docs/lanes.md): `online` records come from `topics.requests`
 * (latency first, deadlines, fallback), `backfill` records from `topics.backfill` (throughput; they
 * fill the model only while no online item waits).
 */
export type Lane = "online" | "backfill";

export const LANES: readonly Lane[] = ["online", "backfill"];

/** Header naming the backfill run a record belongs to (written by `sluice backfill submit`). */
export const RUN_ID_HEADER = "sluice.run-id";

/** The record's run id from its `sluice.run-id` header; undefined when absent or empty. */
export function runIdFromHeaders(headers: RecordHeaders | undefined): string | undefined {
  const value = headerValue(headers, RUN_ID_HEADER);
  return value === undefined || value === "" ? undefined : value;
}
