import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { InferenceWorkerPool } from "../../src/model/inference-worker-pool.js";
import { parseSchedstatMs, WORKER_THREAD_NAME_PREFIX } from "../../src/model/thread-cpu-clock.js";
import { BUSY_WIDTH, buildBusyMatMulBytes } from "./tiny-tensor-onnx.js";

/** Rows per call of the busy model (`busyFeeds`). */
const BUSY_ROWS = 256;

/**
 * A CPU-heavy tensor model written to a temporary folder before the file's tests (and removed after
 * them); returns a function that starts a pool of two backfill workers at the process's own priority
 * (nice 0, so nice cannot be what protects anyone) running it, one ORT thread each, no spinning.
 */
export function useBusyBackfillPool(): () => Promise<InferenceWorkerPool> {
  let dir: string;
  let modelPath: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-cpu-share-"));
    modelPath = join(dir, "busy.onnx");
    await writeFile(modelPath, buildBusyMatMulBytes(24));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  return () =>
    InferenceWorkerPool.start(
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
}

/** One call's feeds for the busy model. */
export const busyFeeds = () => [
  {
    name: "x",
    type: "float32" as const,
    dims: [BUSY_ROWS, BUSY_WIDTH],
    data: Float32Array.from({ length: BUSY_ROWS * BUSY_WIDTH }, (_, i) => (i % 17) / 17),
  },
];

/** CPU ms of this process's inference worker threads (and their ORT pools), from the kernel. */
export function workerThreadsCpuMs(): number {
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
export async function neighbour(ms: number): Promise<number> {
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
