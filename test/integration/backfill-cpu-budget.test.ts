import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InferenceWorkerPool } from "../../src/model/inference-worker-pool.js";
import { DEFAULT_BURST_MS } from "../../src/model/pool/cpu-budget.js";
import { parseSchedstatMs, WORKER_THREAD_NAME_PREFIX } from "../../src/model/thread-cpu-clock.js";
import { BUSY_WIDTH, buildBusyMatMulBytes } from "../support/tiny-tensor-onnx.js";

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
const ROWS = 256;

let dir: string;
let modelPath: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-cpu-budget-"));
  modelPath = join(dir, "busy.onnx");
  await writeFile(modelPath, buildBusyMatMulBytes(24));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** CPU ms of this process's inference worker threads (and their ORT pools), from the kernel. */
function workerThreadsCpuMs(): number {
  let ms = 0;
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      if (!readFileSync(`/proc/self/task/${tid}/comm`, "utf8").startsWith(WORKER_THREAD_NAME_PREFIX))
        continue;
      ms += parseSchedstatMs(readFileSync(`/proc/self/task/${tid}/schedstat`, "utf8"));
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return ms;
}

/** A neighbour that spins one thread for `ms` and reports the CPU it got, in cores. */
async function neighbour(ms: number): Promise<number> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "-e",
      `const t0 = Date.now(); const c0 = process.cpuUsage(); while (Date.now() - t0 < ${ms}) {}
       const c = process.cpuUsage(c0); process.stdout.write(String((c.user + c.system) / 1000 / (Date.now() - t0)));`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  let out = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  await once(child, "exit");
  return Number(out);
}

const feeds = () => [
  {
    name: "x",
    type: "float32" as const,
    dims: [ROWS, BUSY_WIDTH],
    data: Float32Array.from({ length: ROWS * BUSY_WIDTH }, (_, i) => (i % 17) / 17),
  },
];

describe.runIf(linux)("the backfill lane's CPU budget against a CPU-hungry neighbour", () => {
  it("backfill calls stay within the budget whatever their priority, and the neighbour keeps its CPU", async () => {
    const pool = await InferenceWorkerPool.start(
      {
        modelPath,
        intraOpThreads: 1,
        interOpThreads: 1,
        allowSpinning: false,
        task: "tensor",
        pooling: "cls",
        normalize: false,
        nice: 0,
      },
      1,
      { workers: 2, nice: 0 },
    );
    try {
      // The neighbour alone: what it gets on this machine now.
      const alone = await neighbour(WINDOW_MS / 2);

      pool.limitBackfill({ workerShare: 1, workerDepth: 2, cpuCores: BUDGET_CORES });
      let running = true;
      let calls = 0;
      let callCpuMs = 0;
      const feeder = async () => {
        while (running) {
          const r = await pool.runFeeds({ feeds: feeds(), outputNames: ["y"] }, "backfill");
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
