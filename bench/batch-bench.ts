/**
 * Batch-mode efficiency: rows/s of `sluice batch` (file → JSONL parts, with hashing, manifest and
 * checkpoints) divided by the raw model rows/s on the same texts and the same TextModelRunner. Goal ≥ 0.9.
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:batch markers.
 *
 *   npm run bench:batch     # BENCH_ROWS (default 2000), BENCH_BATCH_SIZE (default 32), BENCH_REPS (default 3)
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { batchModelOptions } from "../src/app/batch-runtime.js";
import { BatchJob } from "../src/batch/batch-job.js";
import { PartFileSink } from "../src/batch/part-file-sink.js";
import { loadConfig } from "../src/config/index.js";
import { TextModelRunner } from "../src/model/text-model-runner.js";
import { FileSource } from "../src/runs/file-source.js";
import { loadCorpus } from "./corpus.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";

const rows = Number(process.env["BENCH_ROWS"] ?? 2000);
const batchSize = Number(process.env["BENCH_BATCH_SIZE"] ?? 32);
const inFlight = 2;
const reps = Number(process.env["BENCH_REPS"] ?? 3);

interface Measurement {
  /** Wall-clock rows/s (what users see; noisy on a shared machine). */
  rowsPerSec: number;
  /** Rows per CPU-second of this process, worker threads included (robust to other load). */
  rowsPerCpuSec: number;
}

async function measure(fn: () => Promise<void>): Promise<Measurement> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuSec = (cpu.user + cpu.system) / 1e6;
  return { rowsPerSec: (rows * 1000) / ms, rowsPerCpuSec: rows / cpuSec };
}

function rawRun(model: TextModelRunner, texts: string[]): Promise<Measurement> {
  const batches: string[][] = [];
  for (let i = 0; i < texts.length; i += batchSize) batches.push(texts.slice(i, i + batchSize));
  return measure(async () => {
    let next = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < batches.length) await model.run(batches[next++]!);
      }),
    );
  });
}

function batchRun(
  model: TextModelRunner,
  input: string,
  out: string,
  sortByLength: boolean,
): Promise<Measurement> {
  return measure(async () => {
    await rm(out, { recursive: true, force: true });
    const summary = await new BatchJob({
      source: new FileSource({ path: input, format: "jsonl", idField: "id", textField: "text" }),
      sink: new PartFileSink({ dir: out, format: "jsonl" }),
      model,
      stateDir: out,
      shardSize: 1000,
      batchSize,
      maxInFlightBatches: inFlight,
      sortByLength,
      mode: "resume",
      outputConfig: { bench: true },
    }).run();
    if (summary.rowsOk + summary.rowsFailed !== rows) {
      throw new Error(`batch run lost rows: ${JSON.stringify(summary)}`);
    }
  });
}

const config = loadConfig();
const model = await TextModelRunner.create(await batchModelOptions(config));
const dir = await mkdtemp(join(tmpdir(), "sluice-batch-bench-"));
try {
  const texts = loadCorpus(rows);
  if (texts.length < rows) throw new Error(`corpus has only ${texts.length} sentences; lower BENCH_ROWS`);
  const input = join(dir, "in.jsonl");
  await writeFile(input, texts.map((text, i) => JSON.stringify({ id: `b${i}`, text })).join("\n"));
  await model.run(texts.slice(0, batchSize)); // warm-up

  // Alternate the runs so drift on the shared machine hits all sides alike; report medians.
  const runs: Record<"raw" | "sorted" | "unsorted", Measurement[]> = { raw: [], sorted: [], unsorted: [] };
  for (let rep = 0; rep < reps; rep++) {
    runs.raw.push(await rawRun(model, texts));
    runs.sorted.push(await batchRun(model, input, join(dir, "out"), true));
    runs.unsorted.push(await batchRun(model, input, join(dir, "out"), false));
  }
  const median = (xs: number[]) => {
    const v = [...xs].sort((a, b) => a - b);
    const mid = Math.floor(v.length / 2);
    return v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
  };
  const med = (k: keyof typeof runs, m: keyof Measurement) => median(runs[k].map((x) => x[m]));
  const f = (x: number) => x.toFixed(1);
  const row = (label: string, k: keyof typeof runs) =>
    `| ${label} | ${f(med(k, "rowsPerSec"))} | ${(med(k, "rowsPerSec") / med("raw", "rowsPerSec")).toFixed(2)} | ${f(med(k, "rowsPerCpuSec"))} | ${(med(k, "rowsPerCpuSec") / med("raw", "rowsPerCpuSec")).toFixed(2)} |`;
  const all = (k: keyof typeof runs) => runs[k].map((x) => f(x.rowsPerSec)).join(", ");
  const md = `## Batch mode (\`npm run bench:batch\`)

${rows} corpus sentences (\`loadCorpus\`), model \`${model.identity.name}@${model.identity.version}\`,
batch size ${batchSize}, ${inFlight} batches in flight, ${config.model.workers} worker(s) × ${config.model.intraOpThreads} intra-op thread(s).
${machineDescription()}, ${new Date().toISOString().slice(0, 10)}. Median of ${reps} alternating runs.

| Run | rows/s | ÷ raw | rows/CPU-s | ÷ raw |
|---|---:|---:|---:|---:|
${row("raw `TextModelRunner.run`, input order", "raw")}
${row("`sluice batch` file → JSONL parts, length-sorted shards (default)", "sorted")}
${row("`sluice batch`, no shard sort", "unsorted")}

Goal: batch ÷ raw ≥ 0.9. The batch run includes hashing the input, JSON encoding, atomic part writes and
manifest checkpoints (shard size 1000). Rows per CPU-second (process CPU, inference worker included) is
the steadier comparison when other work shares the machine. Wall rows/s per run: raw ${all("raw")};
sorted ${all("sorted")}; unsorted ${all("unsorted")}.
`;
  process.stdout.write(md);
  await writeBenchmarkSection("batch", md);
} finally {
  await model.close();
  await rm(dir, { recursive: true, force: true });
}
