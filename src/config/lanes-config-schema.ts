import { z } from "zod";
import { positiveInt } from "./config-fields.js";

/** The `lanes` section: how the online and backfill lanes share an instance (the SLO guard, docs/lanes.md). */
export const lanesSchema = z
  .strictObject({
    guard: z
      .boolean()
      .default(true)
      .describe(
        "The backfill lane's SLO guard (docs/lanes.md): throttle backfill work while the online tail nears onlineLatencyTargetMs. Only acts with topics.backfill set.",
      ),
    onlineLatencyTargetMs: z
      .union([z.literal("auto"), positiveInt().max(600_000)])
      .default("auto")
      .describe(
        "Online latency a reader should see (commit time − request timestamp, p99 over 3 s), ms; the backfill lane yields when the online tail nears it. auto = 1.5 × the online p99 measured while no backfill runs + 25 ms; batching.maxWaitMs + delivery.commitIntervalMs + 100 (210 with the defaults) until measured.",
      ),
    backfillCommitIntervalMs: positiveInt()
      .max(60_000)
      .default(1000)
      .describe(
        "How often a backfill partition commits its transaction, ms (1..60000): backfill results need no 100 ms visibility, and fewer, larger transactions leave the broker to the online lane's commits. The guard spaces them further while it throttles (docs/lanes.md).",
      ),
  })
  .describe("How the online and backfill lanes share an instance (docs/lanes.md).");

/**
 * `lanes.onlineLatencyTargetMs: auto` before the guard has measured the online tail without a
 * backfill: what an uncontended online request costs a reader at most (a batch's wait plus a
 * commit interval) plus 100 ms for inference and the commit. Once measured, auto is 1.5 × that
 * tail + 25 ms (src/processor/backfill-guard.ts). The one home of this rule (docs/lanes.md).
 */
export function onlineLatencyTargetMs(
  target: number | "auto",
  settings: { maxWaitMs: number; commitIntervalMs: number },
): number | { auto: true; untilMeasuredMs: number } {
  return target === "auto"
    ? { auto: true, untilMeasuredMs: settings.maxWaitMs + settings.commitIntervalMs + 100 }
    : target;
}
