import { describe, expect, it } from "vitest";
import { DEFAULT_BURST_MS } from "../../src/model/pool/cpu-budget.js";
import { busyFeeds, neighbour, useBusyBackfillPool, workerThreadsCpuMs } from "../support/cpu-neighbour.js";

/**
 * The backfill lane's CPU budget holds against the scheduler (docs/lanes.md, "The CPU budget"): two
 * backfill workers at the process's own priority (`model.backfillNice` 0, so nice cannot be what
 * protects anyone) always have work, a CPU-hungry neighbour process runs at normal priority, and the
 * pool's budget is half a core. The backfill workers' CPU, read from the kernel's per-thread
 * counters, stays within the budget, and the neighbour keeps the CPU it gets with no backfill at all.
 * Linux only (per-thread counters under /proc). A component test: it measures CPU shares, so it runs
 * where fewer test files compete for the machine.
 */
const linux = process.platform === "linux";
const BUDGET_CORES = 0.5;
const WINDOW_MS = 4000;

const startPool = useBusyBackfillPool();

describe.runIf(linux)("the backfill lane's CPU budget against a CPU-hungry neighbour", () => {
  it("backfill calls stay within the budget whatever their priority, and the neighbour keeps its CPU", async () => {
    const pool = await startPool();
    try {
      // The neighbour alone: what it gets on this machine now.
      const alone = await neighbour(WINDOW_MS / 2);

      pool.limitBackfill({ workerShare: 1, workerDepth: 2, cpuCores: BUDGET_CORES });
      let running = true;
      let calls = 0;
      let callCpuMs = 0;
      const feeder = async () => {
        while (running) {
          const r = await pool.runFeeds({ feeds: busyFeeds(), outputNames: ["y"] }, "backfill");
          calls++;
          callCpuMs = Math.max(callCpuMs, r.cpuMs);
        }
      };
      // Six callers: both backfill workers always have two calls to take.
      const feeders = Array.from({ length: 6 }, feeder);
      await new Promise((r) => setTimeout(r, 500));
      const cpuBefore = workerThreadsCpuMs();
      const t0 = performance.now();
      const beside = await neighbour(WINDOW_MS);
      const wallMs = performance.now() - t0;
      const backfillMs = workerThreadsCpuMs() - cpuBefore;
      running = false;
      await Promise.all(feeders);

      const backfillCores = backfillMs / wallMs;
      console.log(
        `backfill ${backfillCores.toFixed(3)} cores (budget ${BUDGET_CORES}, ${calls} calls, longest ${callCpuMs.toFixed(1)} CPU-ms); neighbour alone ${alone.toFixed(3)}, beside ${beside.toFixed(3)} cores`,
      );
      expect(calls).toBeGreaterThan(10);
      // At most the budget over the window, plus the bucket and the calls already running (4) when it ran out.
      expect(backfillMs).toBeLessThanOrEqual(BUDGET_CORES * wallMs + DEFAULT_BURST_MS + 4 * callCpuMs);
      // And the budget is used, not starved.
      expect(backfillCores).toBeGreaterThan(BUDGET_CORES * 0.6);
      expect(beside).toBeGreaterThanOrEqual(alone * 0.8);
    } finally {
      await pool.close();
    }
  }, 30_000);
});
