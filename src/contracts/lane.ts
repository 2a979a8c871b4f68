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

/**
 * Header naming the model version a backfill row must be scored by (`sluice backfill submit --model
 * candidate` writes the candidate's; docs/model-upgrades.md). Absent: the version online answers with.
 */
export const MODEL_VERSION_HEADER = "sluice.model-version";

/** The record's required model version from its `sluice.model-version` header; undefined when absent or empty. */
export function modelVersionFromHeaders(headers: RecordHeaders | undefined): string | undefined {
  const value = headerValue(headers, MODEL_VERSION_HEADER);
  return value === undefined || value === "" ? undefined : value;
}
