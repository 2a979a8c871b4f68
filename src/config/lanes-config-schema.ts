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
    backfillCpuCores: z
      .union([z.literal("auto"), z.number().min(0.05).max(1024)])
      .default("auto")
      .describe(
        "The backfill lane's CPU budget, cores (0.05..1024): the backfill model calls' measured CPU plus the main thread's work for backfill records stays within it whatever the scheduler does, so the online lane and the node's other processes keep the rest; the SLO guard lowers it further while it throttles (and applies it: lanes.guard false turns it off). auto = half the cores the process may use (its cgroup quota, its affinity). Instances that share a node share it: give each its part (docs/lanes.md).",
      ),
    cpuHeadroomCores: z
      .union([z.literal("auto"), z.number().min(0).max(1024)])
      .default("auto")
      .describe(
        "Idle CPU the backfill lane leaves, cores (0..1024; 0 = off): while less than this is idle on the machine (or under the container's CPU quota), the backfill lane's CPU budget shrinks, so the broker, the online lane of every instance and sidecars get a CPU the moment they wake. Instances that share the machine each keep it, and together leave about this much idle. auto = a quarter of that CPU (docs/lanes.md, \"Headroom\").",
      ),
  })
  .describe("How the online and backfill lanes share an instance (docs/lanes.md).");

/** The share of the process's cores that `lanes.backfillCpuCores: auto` gives the backfill lane. */
export const AUTO_BACKFILL_CPU_SHARE = 0.5;

/**
 * `lanes.backfillCpuCores` in cores: a number as it is, `auto` = AUTO_BACKFILL_CPU_SHARE of `cores`
 * (the cores the process may use, src/model/cpu-limit.ts). The one home of this rule (docs/lanes.md).
 */
export function backfillCpuCores(setting: number | "auto", cores: number): number {
  return setting === "auto" ? AUTO_BACKFILL_CPU_SHARE * cores : setting;
}

/** The share of the machine's (or the container's) CPU that `lanes.cpuHeadroomCores: auto` keeps idle. */
export const AUTO_CPU_HEADROOM_SHARE = 0.25;

/**
 * `lanes.cpuHeadroomCores` in cores: a number as it is, `auto` = AUTO_CPU_HEADROOM_SHARE of
 * `capacityCores` (the CPU the idle time is counted against: the machine's CPUs, or the cgroup
 * quota; src/model/idle-cpu-meter.ts). The one home of this rule (docs/lanes.md).
 */
export function cpuHeadroomCores(setting: number | "auto", capacityCores: number): number {
  return setting === "auto" ? AUTO_CPU_HEADROOM_SHARE * capacityCores : setting;
}

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
