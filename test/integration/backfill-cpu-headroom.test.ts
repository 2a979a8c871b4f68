import { describe, expect, it } from "vitest";
import { cpuHeadroomCores } from "../../src/config/lanes-config-schema.js";
import { IdleCpuMeter } from "../../src/model/idle-cpu-meter.js";
import { GUARD } from "../../src/processor/backfill-guard.js";
import { CpuHeadroom } from "../../src/processor/cpu-headroom.js";
import { busyFeeds, neighbour, useBusyBackfillPool, workerThreadsCpuMs } from "../support/cpu-neighbour.js";

/**
 * The backfill lane keeps idle CPU on the machine (docs/lanes.md, "Headroom"): two backfill workers
 * at the process's own priority always have work, with a CPU budget of all but half a core of the
 * machine (on 2 cores: 1.5, what two instances' default budgets add up to), beside a CPU-hungry
 * neighbour process at normal priority. Every guard tick the machine's idle CPU (/proc/stat) feeds
 * `CpuHeadroom` with the default reserve, and its share scales the budget, as BackfillThrottle does.
 * The machine keeps idle CPU, the neighbour keeps the CPU it gets alone, and the backfill still
 * runs. Linux only. A CPU test (npm run test:cpu): it measures CPU shares, one file at a time.
 */
const linux = process.platform === "linux";
const WINDOW_MS = 4000;

const startPool = useBusyBackfillPool();

describe.runIf(linux)("the backfill lane's headroom against a CPU-hungry neighbour", () => {
  it("leaves the machine idle CPU: the neighbour keeps its core and the backfill still runs", async () => {
    const pool = await startPool();
    const machine = new IdleCpuMeter();
    const reserve = cpuHeadroomCores("auto", machine.capacityCores);
    const budget = Math.min(2, machine.capacityCores - 0.5);
    const headroom = new CpuHeadroom(reserve);
    let running = true;
    let calls = 0;
    const control = setInterval(() => {
      const share = headroom.observe(performance.now(), machine.idleCores());
      pool.limitBackfill({ workerShare: 1, workerDepth: 2, cpuCores: budget * share });
    }, GUARD.tickMs);
    try {
      const alone = await neighbour(WINDOW_MS / 2);
      pool.limitBackfill({ workerShare: 1, workerDepth: 2, cpuCores: budget });
      const feeder = async () => {
        while (running) {
          await pool.runFeeds({ feeds: busyFeeds(), outputNames: ["y"] }, "backfill");
          calls++;
        }
      };
      // Six callers: both backfill workers always have two calls to take.
      const feeders = Array.from({ length: 6 }, feeder);
      // The controller's first seconds: it halves the budget at most every 500 ms.
      await new Promise((r) => setTimeout(r, 1500));
      const window = new IdleCpuMeter();
      window.idleCores();
      const cpuBefore = workerThreadsCpuMs();
      const t0 = performance.now();
      const beside = await neighbour(WINDOW_MS);
      const wallMs = performance.now() - t0;
      const idle = window.idleCores() ?? Number.NaN;
      const backfillCores = (workerThreadsCpuMs() - cpuBefore) / wallMs;
      running = false;
      await Promise.all(feeders);
      console.log(
        `machine ${machine.capacityCores} cores, reserve ${reserve}, budget ${budget}: backfill ${backfillCores.toFixed(3)} cores (${calls} calls), idle ${idle.toFixed(3)} cores, headroom share at the end ${headroom.share.toFixed(3)}; neighbour alone ${alone.toFixed(3)}, beside ${beside.toFixed(3)} cores`,
      );
      expect(calls).toBeGreaterThan(10);
      // The neighbour keeps the CPU it gets alone…
      expect(beside).toBeGreaterThanOrEqual(alone * 0.8);
      // The machine is not left without idle CPU…
      expect(idle).toBeGreaterThanOrEqual(reserve * 0.4);
      // …and the backfill is throttled, not stopped.
      expect(backfillCores).toBeGreaterThan(0.1);
    } finally {
      running = false;
      clearInterval(control);
      await pool.close();
    }
  }, 30_000);
});
