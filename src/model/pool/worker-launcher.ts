import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import type { ModelSettings } from "../../config/model-settings.js";
import { SluiceError } from "../../sluice-error.js";
import type { WorkerHello, WorkerInit } from "../worker-protocol.js";

/** A worker's first message once its ORT session exists: the model's signature and how it measures CPU. */
export type WorkerReady = Extract<WorkerHello, { type: "ready" }>;

/** The worker settings of a model's `ModelSettings` (text and tensor runners load workers alike). */
export function workerInitOf(o: ModelSettings): WorkerInit {
  return {
    modelPath: o.modelPath,
    intraOpThreads: o.intraOpThreads,
    interOpThreads: o.interOpThreads,
    allowSpinning: o.allowSpinning,
    task: o.task,
    pooling: o.pooling,
    normalize: o.normalize,
    nice: 0,
  };
}

/**
 * Starts one worker thread and waits until its ORT session is ready; a worker that cannot load the
 * model (its `init-failed` hello, an error or an exit while loading) is MODEL_LOAD_FAILED.
 */
export function launchWorker(init: WorkerInit): Promise<{ worker: Worker; hello: WorkerReady }> {
  return new Promise((resolve, reject) => {
    const worker = startWorker(init);
    const fail = (message: string) => {
      void worker.terminate();
      reject(new SluiceError("MODEL_LOAD_FAILED", `could not load model ${init.modelPath}: ${message}`));
    };
    worker.once("message", (hello: WorkerHello) => {
      worker.off("error", onError);
      worker.off("exit", onExit);
      if (hello.type === "ready") resolve({ worker, hello });
      else fail(hello.message);
    });
    const onError = (error: Error) => fail(error.message);
    const onExit = (code: number) => fail(`worker exited with code ${code} while loading`);
    worker.once("error", onError);
    worker.once("exit", onExit);
  });
}

// The worker entry sits in the folder above this one: `.ts` under vitest/tsx, `.js` in dist/.
const selfPath = fileURLToPath(import.meta.url);
const workerPath = join(
  dirname(selfPath),
  "..",
  `inference-worker.${selfPath.endsWith(".ts") ? "ts" : "js"}`,
);

/**
 * Under vitest/tsx the worker is TypeScript. `execArgv: ["--import", "tsx"]` does not reach a worker's
 * own entry module on Node 20, so a TypeScript worker starts from a small eval'd bootstrap that registers
 * tsx's ESM hooks in the worker and then imports the real entry. dist/ workers start directly.
 */
function startWorker(data: WorkerInit): Worker {
  if (!workerPath.endsWith(".ts")) return new Worker(workerPath, { workerData: data });
  const bootstrap = `import(${JSON.stringify(tsxEsmApiUrl())}).then((m) => { m.register(); return import(${JSON.stringify(pathToFileURL(workerPath).href)}); })`;
  return new Worker(bootstrap, { eval: true, workerData: data });
}

/**
 * URL of tsx's ESM API. Neither `import.meta.resolve` (missing under vitest's module runner) nor
 * `require.resolve` (yields the CommonJS build, which cannot register ESM hooks) fits, so read the
 * package's own export map.
 */
function tsxEsmApiUrl(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve("tsx/package.json");
  const manifest = require(manifestPath) as { exports: Record<string, { import?: { default?: string } }> };
  const relative = manifest.exports["./esm/api"]?.import?.default;
  if (relative === undefined) throw new Error("installed tsx has no ./esm/api export");
  return pathToFileURL(join(dirname(manifestPath), relative)).href;
}
