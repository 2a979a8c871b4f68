import type { Command } from "commander";
import { maxBatchSize } from "../config/config-schema.js";
import type { ModelSettings } from "../config/model-settings.js";
import { SluiceError } from "../sluice-error.js";
import { loadCommandConfig } from "./config-command.js";

interface PlanCliOptions {
  items: string;
  window: string;
  perWorkerQps?: string;
  headroom: string;
  measure?: boolean;
  measureSeconds: string;
  coresPerWorker?: string;
  gpu?: boolean;
  json?: boolean;
}

/**
 * `sluice plan`: workers needed to score N items within a window. `--measure` replaces the per-worker
 * rate by a short local run of the configured model (one worker, configured batch size).
 */
export function register(program: Command): void {
  program
    .command("plan")
    .description("Capacity plan for a batch job: required rate and workers (see docs/batch-mode.md)")
    .requiredOption("--items <n>", "items to score")
    .requiredOption("--window <duration>", "time available, e.g. 2h, 90m, 1h30m")
    .option("--per-worker-qps <rate>", "items/s one worker sustains (or use --measure)")
    .option("--headroom <fraction>", "safety margin in [0, 1)", "0.2")
    .option("--measure", "measure the per-worker rate with a short local run of the configured model")
    .option("--measure-seconds <s>", "length of the --measure run", "5")
    .option("--cores-per-worker <n>", "cores one worker keeps busy (default: model.intraOpThreads)")
    .option("--gpu", "workers are GPUs: price GPU-hours with cost.gpuHour")
    .option("--json", "print the plan as JSON")
    .action(async (opts: PlanCliOptions, command: Command) => {
      let perWorker = opts.perWorkerQps === undefined ? undefined : Number(opts.perWorkerQps);
      let measuredNote = "";
      let measured: { items: number; ms: number; batchSize: number; cpuSecondsPerItem: number } | null = null;
      if (opts.measure) {
        // One worker: the plan multiplies a per-worker rate (the other model settings are the configured ones).
        const config = await loadCommandConfig(command, { model: { workers: 1 } });
        const seconds = Number(opts.measureSeconds);
        if (!Number.isFinite(seconds) || seconds <= 0) {
          throw new SluiceError(
            "CONFIG_INVALID",
            `--measure-seconds must be positive, got ${opts.measureSeconds}`,
          );
        }
        const { batchModelOptions } = await import("../app/batch-runtime.js");
        const batchSize = maxBatchSize(config.batching, config.model.task);
        const m = await measureItemsPerSec(await batchModelOptions(config), batchSize, seconds * 1000);
        perWorker = m.itemsPerSec;
        const cpuSecondsPerItem = m.cpuMs / 1000 / m.items;
        measured = {
          items: m.items,
          ms: Math.round(m.ms),
          batchSize,
          cpuSecondsPerItem,
        };
        measuredNote =
          `measured: ${m.items} items in ${(m.ms / 1000).toFixed(1)} s with batch size ${batchSize} (one worker), ` +
          `${(cpuSecondsPerItem * 1000).toFixed(2)} CPU-s per 1k items (every thread of the process)`;
      }
      if (perWorker === undefined) {
        throw new SluiceError("CONFIG_INVALID", "give --per-worker-qps <rate> or --measure");
      }
      const config = await loadCommandConfig(command);
      const { formatCapacityPlan, parseDurationMs, planCapacity } = await import("../batch/capacity-plan.js");
      const plan = planCapacity({
        items: Number(opts.items),
        windowMs: parseDurationMs(opts.window),
        perWorkerItemsPerSec: perWorker,
        headroom: Number(opts.headroom),
        coresPerWorker:
          opts.coresPerWorker === undefined ? config.model.intraOpThreads : Number(opts.coresPerWorker),
        ...(measured ? { cpuSecondsPerItem: measured.cpuSecondsPerItem } : {}),
        ...(opts.gpu ? { gpu: true } : {}),
        prices: config.cost,
      });
      if (opts.json) process.stdout.write(`${JSON.stringify({ ...plan, measured }, null, 2)}\n`);
      else process.stdout.write(`${measuredNote ? `${measuredNote}\n` : ""}${formatCapacityPlan(plan)}\n`);
    });
}

/** Sentences of mixed length (5–60 words) so padding behaves like real text. */
function sampleTexts(n: number): string[] {
  const words =
    "stream batch kafka model token latency throughput window shard replica partition offset commit result vector embed query passage index score".split(
      " ",
    );
  return Array.from({ length: n }, (_, i) => {
    const len = 5 + ((i * 37) % 56);
    return Array.from({ length: len }, (_, j) => words[(i * 7 + j * 3) % words.length]).join(" ");
  });
}

async function measureItemsPerSec(
  settings: ModelSettings,
  batchSize: number,
  durationMs: number,
): Promise<{ itemsPerSec: number; items: number; ms: number; cpuMs: number }> {
  const { TextModelRunner } = await import("../model/text-model-runner.js");
  const model = await TextModelRunner.create(settings);
  try {
    const texts = sampleTexts(batchSize * 8);
    await model.run(texts.slice(0, batchSize)); // warm-up: session init and first-run allocations
    let items = 0;
    let i = 0;
    const cpuStart = process.cpuUsage();
    const start = performance.now();
    while (performance.now() - start < durationMs) {
      const batch = texts.slice((i * batchSize) % texts.length, ((i * batchSize) % texts.length) + batchSize);
      await model.run(batch);
      items += batch.length;
      i++;
    }
    const ms = performance.now() - start;
    const cpu = process.cpuUsage(cpuStart);
    return { itemsPerSec: (items * 1000) / ms, items, ms, cpuMs: (cpu.user + cpu.system) / 1000 };
  } finally {
    await model.close();
  }
}
