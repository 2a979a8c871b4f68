import { type RunCostShare, runCostShareKey } from "../contracts/run-cost-share.js";
import type { RunCostCounts } from "./run-cost.js";

/**
 * A backfill run's cost: the sum of the committed cost shares every serve instance wrote for its rows
 * (src/contracts/run-cost-share.ts). A share is keyed by its transaction (input partition and
 * offset), so one read twice (an at-least-once replay, a reader that sees a record before
 * compaction) counts once. Pure.
 */
export function sumRunCostShares(runId: string, shares: Iterable<RunCostShare>): RunCostCounts {
  const seen = new Set<string>();
  const total: RunCostCounts = { items: 0, tokens: 0, modelCpuMs: 0 };
  for (const s of shares) {
    if (s.runId !== runId) continue;
    const key = runCostShareKey(s);
    if (seen.has(key)) continue;
    seen.add(key);
    total.items += s.items;
    total.tokens += s.tokens;
    total.modelCpuMs += s.modelCpuMs;
  }
  return total;
}
