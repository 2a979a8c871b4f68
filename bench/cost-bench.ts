/**
 * Cost accuracy (issue 21): does what Sluice reports as CPU agree with what the kernel says?
 *
 * 1. `sluice batch` over BENCH_ROWS (default 3000) paragraphs with the default model, BENCH_REPS
 *    (default 3) times. While each run lives, the benchmark samples `/proc/<pid>/stat` (the process)
 *    and `/proc/<pid>/task/<tid>/stat` of the inference worker threads (named `sluice-infer-*` by
 *    src/model/thread-cpu-clock.ts, their ORT pool threads inherit the name) every 20 ms; the last
 *    sample before exit is compared with `cost.totalCpuSeconds` and `cost.modelCpuSeconds` of the
 *    run's manifest.json.
 * 2. `sluice serve` at about half the batch rate (open loop, same paragraphs) for BENCH_SERVE_SECONDS
 *    (default 40): CPU-seconds per 1k items from outside over the window between the first and the
 *    last committed result, beside the batch runs' figure.
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:cost markers.
 *
 *   KAFKA_BROKERS=127.0.0.1:19092 npm run bench:cost   # BENCH_ROWS, BENCH_REPS, BENCH_SERVE_SECONDS
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import type { BatchManifest } from "../src/batch/batch-manifest.js";
import {
  CLOCK_TICKS_PER_SECOND,
  parseProcStat,
  statCpuMs,
  WORKER_THREAD_NAME_PREFIX,
} from "../src/model/thread-cpu-clock.js";
import { loadCorpus } from "./corpus.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";

const rows = Number(process.env["BENCH_ROWS"] ?? 3000);
const reps = Number(process.env["BENCH_REPS"] ?? 3);
const serveSeconds = Number(process.env["BENCH_SERVE_SECONDS"] ?? 40);
const brokers = process.env["KAFKA_BROKERS"] ?? "";
const repoRoot = join(import.meta.dirname, "..");

interface CpuSample {
  atMs: number;
  processMs: number;
  workersMs: number;
  workerThreads: number;
}

/**
 * Last CPU seen per inference worker thread of a process: a thread that ended (the pool closes
 * before the process exits) keeps its last reading, so the sum covers every worker thread there was.
 */
const workerCpu = new Map<string, number>();

/** One reading of the process's and its inference workers' CPU from outside; null once it exited. */
function sample(pid: number): CpuSample | null {
  try {
    const processMs = statCpuMs(parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8")));
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = parseProcStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"));
        if (stat.comm.startsWith(WORKER_THREAD_NAME_PREFIX)) workerCpu.set(`${pid}/${tid}`, statCpuMs(stat));
      } catch {
        // the thread just ended
      }
    }
    let workersMs = 0;
    let workerThreads = 0;
    for (const [key, ms] of workerCpu) {
      if (!key.startsWith(`${pid}/`)) continue;
      workersMs += ms;
      workerThreads++;
    }
    return { atMs: performance.now(), processMs, workersMs, workerThreads };
  } catch {
    return null;
  }
}

/** Paragraphs of 3–6 corpus sentences (roughly 40–250 tokens), deterministic. */
function paragraphs(n: number): string[] {
  const sentences = loadCorpus(n * 6);
  const out: string[] = [];
  let next = 0;
  for (let i = 0; i < n; i++) {
    const k = 3 + (i % 4);
    const chunk: string[] = [];
    for (let j = 0; j < k; j++) chunk.push(sentences[next++ % sentences.length]!);
    out.push(chunk.join(" "));
  }
  return out;
}

function sluice(args: string[], env: Record<string, string> = {}) {
  return spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

interface BatchRep {
  reportedTotal: number;
  measuredTotal: number;
  reportedModel: number;
  measuredModel: number;
  wallSeconds: number;
  per1kItems: number;
  modelPer1kItems: number;
  per1kTokens: number;
  workerThreads: number;
  source: string | null;
}

async function batchRep(input: string, out: string): Promise<BatchRep> {
  await rm(out, { recursive: true, force: true });
  const child = sluice(["batch", "--input", input, "--output", out]);
  let log = "";
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  let last: CpuSample | null = null;
  const exited = new Promise<number | null>((res) => child.on("exit", (code) => res(code)));
  let done = false;
  void exited.then(() => (done = true));
  while (!done) {
    const s = sample(child.pid!);
    if (s) last = s;
    await new Promise((r) => setTimeout(r, 20));
  }
  if ((await exited) !== 0 || !last) throw new Error(`sluice batch failed:\n${log.slice(-2000)}`);
  const manifest = JSON.parse(await readFile(join(out, "manifest.json"), "utf8")) as BatchManifest;
  const cost = manifest.cost!;
  return {
    reportedTotal: cost.totalCpuSeconds!,
    measuredTotal: last.processMs / 1000,
    reportedModel: cost.modelCpuSeconds,
    measuredModel: last.workersMs / 1000,
    wallSeconds: cost.wallSeconds!,
    per1kItems: cost.totalCpuSecondsPer1kItems!,
    modelPer1kItems: cost.modelCpuSecondsPer1kItems!,
    per1kTokens: cost.totalCpuSecondsPer1kTokens ?? Number.NaN,
    workerThreads: last.workerThreads,
    source: cost.modelCpuSource,
  };
}

interface ServeRun {
  rate: number;
  items: number;
  windowSeconds: number;
  processPer1k: number;
  workersPer1k: number;
  metricModelPer1k: number;
}

/** `sluice serve` fed `rate` requests/s for `seconds`; CPU per 1k results over the result window. */
async function serveRun(texts: string[], rate: number, seconds: number): Promise<ServeRun> {
  const base = `cost-bench-${Date.now().toString(36)}`;
  const topic = `${base}.requests`;
  const results = `${base}.results`;
  const kafka = new Kafka({ brokers: brokers.split(","), logLevel: logLevel.NOTHING, clientId: base });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic, numPartitions: 2 },
      { topic: results, numPartitions: 2 },
    ],
  });
  await admin.disconnect();
  const child = sluice(["serve"], {
    KAFKA_BROKERS: brokers,
    SLUICE_TOPICS__REQUESTS: topic,
    SLUICE_TOPICS__RESULTS: results,
    SLUICE_TOPICS__DEAD_LETTERS: `${base}.dlq`,
    SLUICE_TOPICS__DEDUP_CHANGELOG: `${base}.dedup`,
    SLUICE_TOPICS__FRESHNESS: `${base}.freshness`,
    SLUICE_CONSUMER__GROUP_ID: `${base}-group`,
    SLUICE_OBSERVABILITY__METRICS_PORT: "19464",
    SLUICE_OBSERVABILITY__LOG_LEVEL: "warn",
    KAFKAJS_NO_PARTITIONER_WARNING: "1",
  });
  let log = "";
  child.stdout.on("data", (d: Buffer) => (log += d.toString()));
  child.stderr.on("data", (d: Buffer) => (log += d.toString()));
  try {
    // Ready when /metrics answers with a loaded model.
    for (const started = Date.now(); ; ) {
      if (Date.now() - started > 180_000) throw new Error(`serve did not start:\n${log.slice(-2000)}`);
      const text = await fetch("http://127.0.0.1:19464/metrics")
        .then((r) => r.text())
        .catch(() => "");
      if (text.includes("sluice_model_info{")) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const consumer = kafka.consumer({ groupId: `${base}-reader`, readUncommitted: false });
    await consumer.connect();
    await consumer.subscribe({ topic: results, fromBeginning: true });
    const seen: { atMs: number; s: CpuSample | null }[] = [];
    let received = 0;
    await consumer.run({
      eachBatch: async ({ batch }) => {
        received += batch.messages.length;
        seen.push({ atMs: performance.now(), s: sample(child.pid!) });
      },
    });
    const metricModel = async () => {
      const text = await fetch("http://127.0.0.1:19464/metrics").then((r) => r.text());
      return [...text.matchAll(/^sluice_model_cpu_seconds_total\{[^}]*\} ([\d.e+-]+)$/gm)].reduce(
        (n, m) => n + Number(m[1]),
        0,
      );
    };
    const producer = kafka.producer();
    await producer.connect();
    const total = Math.round(rate * seconds);
    // Warm-up: a few requests before the window, so the window starts in steady state.
    for (let i = 0; i < 10; i++) await producer.send({ topic, messages: [message(`warm-${i}`, texts[i]!)] });
    while (received < 10) await new Promise((r) => setTimeout(r, 100));
    const start = sample(child.pid!)!;
    const startReceived = received;
    const model0 = await metricModel();
    const t0 = performance.now();
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      void producer.send({ topic, messages: [message(`q-${i}`, texts[i % texts.length]!)] });
    }
    for (const started = Date.now(); received < startReceived + total; ) {
      if (Date.now() - started > 120_000) throw new Error(`serve fell behind: ${received}/${total}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const end = sample(child.pid!)!;
    const model1 = await metricModel();
    await producer.disconnect();
    await consumer.disconnect();
    const items = received - startReceived;
    return {
      rate,
      items,
      windowSeconds: (end.atMs - start.atMs) / 1000,
      processPer1k: (end.processMs - start.processMs) / items,
      workersPer1k: (end.workersMs - start.workersMs) / items,
      metricModelPer1k: ((model1 - model0) * 1000) / items,
    };
  } finally {
    child.kill("SIGTERM");
    await new Promise((r) => child.on("exit", r));
  }
}

function message(id: string, text: string) {
  return { key: id, value: JSON.stringify({ id, text }) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const pct = (reported: number, measured: number) => (100 * (reported - measured)) / measured;
const f = (x: number, d = 2) => x.toFixed(d);

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "sluice-cost-bench-"));
  const texts = paragraphs(rows);
  const input = join(dir, "paragraphs.jsonl");
  await writeFile(input, `${texts.map((text, i) => JSON.stringify({ id: `p-${i}`, text })).join("\n")}\n`);
  const words = texts.map((t) => t.split(" ").length).sort((a, b) => a - b);
  const loadBefore = machineDescription();
  const batch: BatchRep[] = [];
  for (let r = 0; r < reps; r++) {
    const rep = await batchRep(input, join(dir, `out-${r}`));
    batch.push(rep);
    process.stderr.write(`batch rep ${r + 1}: ${JSON.stringify(rep)}\n`);
  }
  const batchRate = median(batch.map((b) => rows / b.wallSeconds));
  let serve: ServeRun | null = null;
  if (brokers !== "") {
    serve = await serveRun(texts, Math.max(1, Math.round(batchRate / 2)), serveSeconds);
    process.stderr.write(`serve: ${JSON.stringify(serve)}\n`);
  }
  const loadAfter = machineDescription();
  await rm(dir, { recursive: true, force: true });

  const totalErr = batch.map((b) => pct(b.reportedTotal, b.measuredTotal));
  const modelErr = batch.map((b) => pct(b.reportedModel, b.measuredModel));
  const worst = (xs: number[]) => xs.reduce((w, x) => (Math.abs(x) > Math.abs(w) ? x : w), 0);
  const batchPer1k = median(batch.map((b) => b.per1kItems));
  const lines = [
    "## Cost accuracy (`npm run bench:cost`)",
    "",
    `\`sluice batch\` over ${rows} paragraphs of 3–6 corpus sentences (${words[0]}–${words[words.length - 1]} words, median ${median(words)}), default model and configuration (model CPU source: ${batch[0]?.source}, ${batch[0]?.workerThreads} worker thread(s)), ${reps} runs.`,
    `Outside measurement: \`/proc/<pid>/stat\` of the process and \`/proc/<pid>/task/*/stat\` of the threads named \`${WORKER_THREAD_NAME_PREFIX}-*\`, sampled every 20 ms; the last sample before exit (clock ticks of ${1000 / CLOCK_TICKS_PER_SECOND} ms).`,
    `Machine: ${loadBefore} at start; ${loadAfter.replace(/^.*load average/, "load average")} at end. Shared with other agents' jobs: CPU-seconds are robust to that, wall times are not.`,
    "",
    "| Run | reported total CPU-s | measured | diff | reported model CPU-s | measured | diff | wall s | CPU-s / 1k items | model CPU-s / 1k items |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...batch.map(
      (b, i) =>
        `| batch ${i + 1} | ${f(b.reportedTotal)} | ${f(b.measuredTotal)} | ${f(totalErr[i]!, 1)} % | ${f(b.reportedModel)} | ${f(b.measuredModel)} | ${f(modelErr[i]!, 1)} % | ${f(b.wallSeconds, 1)} | ${f(b.per1kItems)} | ${f(b.modelPer1kItems)} |`,
    ),
    "",
    `Goal: within 5 %. Total CPU: median ${f(median(totalErr), 1)} %, worst ${f(worst(totalErr), 1)} %; model CPU: median ${f(median(modelErr), 1)} %, worst ${f(worst(modelErr), 1)} %.`,
    "The reported total counts from process start (start-up and model load are part of the run), as the outside reading does.",
  ];
  if (serve) {
    const ratio = serve.processPer1k / batchPer1k;
    lines.push(
      "",
      "### Cost per 1k items: `serve` at about half the batch rate vs `batch`",
      "",
      `\`sluice serve\` (default configuration, 2 partitions) fed ${serve.rate} requests/s open loop (about half the batch runs' median ${f(batchRate, 1)} rows/s) with the same paragraphs; CPU from outside over the window from the first to the last of ${serve.items} results (${f(serve.windowSeconds, 1)} s, after 10 warm-up requests).`,
      "",
      "| Mode | CPU-s / 1k items (process) | model CPU-s / 1k items (worker threads) |",
      "| --- | ---: | ---: |",
      `| batch (median of ${reps}, whole run incl. start-up) | ${f(batchPer1k)} | ${f(median(batch.map((b) => b.modelPer1kItems)))} |`,
      `| serve at ~50 % load (steady window) | ${f(serve.processPer1k)} | ${f(serve.workersPer1k)} (metric: ${f(serve.metricModelPer1k)}) |`,
      "",
      `Batch is ${f(ratio, 2)}× cheaper per item (serve ÷ batch, process CPU).`,
    );
  }
  await writeBenchmarkSection("cost", lines.join("\n"));
  process.stdout.write(`${lines.join("\n")}\n`);
}

await main();
