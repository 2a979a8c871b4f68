/**
 * Streaming pipeline benchmark: the transaction cadence trade-off (DESIGN.md §3) measured end to end
 * through a real broker. For each model (tiny generated ONNX model = Kafka/transaction overhead
 * dominates; default BGE = model dominates) and each `commitIntervalMs`:
 *
 *  - throughput: N pre-produced requests drained by an in-process StreamProcessor, records/s from
 *    the first to the last result seen by a read_committed reader;
 *  - latency: open-loop load at a constant rate (requests are due on a fixed schedule whether or
 *    not earlier ones finished); end-to-end latency = read_committed arrival − *scheduled* send
 *    time, so a stall is charged to every request it delays (no coordinated omission).
 *
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:pipeline markers.
 *
 *   KAFKA_BROKERS=127.0.0.1:29092 node --import tsx bench/pipeline-bench.ts
 *   env: BENCH_INTERVALS (default "0,100,500"), BENCH_MODELS ("tiny,default"), BENCH_SECONDS (10)
 */
import { mkdtemp, rm } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as hdr from "hdr-histogram-js";
import { Kafka, logLevel } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { ensureTopics } from "../src/kafka/topic-admin.js";
import { ensureDefaultModel } from "../src/model/default-model.js";
import { ModelRunner } from "../src/model/model-runner.js";
import { SluiceEvents } from "../src/observability/sluice-events.js";
import { StreamProcessor } from "../src/processor/stream-processor.js";
import { createTinyModel } from "../test/support/tiny-onnx.js";
import { loadCorpus } from "./corpus.js";
import { writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const brokers = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
if (brokers.length === 0) {
  process.stderr.write("Set KAFKA_BROKERS (e.g. 127.0.0.1:29092, or start one with `sluice kafka start`).\n");
  process.exit(2);
}
const intervals = (process.env.BENCH_INTERVALS ?? "0,100,500").split(",").map(Number);
const models = (process.env.BENCH_MODELS ?? "tiny,default").split(",");
const seconds = Number(process.env.BENCH_SECONDS ?? 10);
const PARTITIONS = 3;

interface ModelProfile {
  label: string;
  runner: ModelRunner;
  drainRecords: number;
  ratePerSec: number;
  texts: string[];
}

interface Row {
  model: string;
  commitIntervalMs: number;
  throughput: number;
  /** Mean items per inferred batch during the drain. */
  drainBatchSize: number;
  transactionsPerSec: number;
  /** Median duration of one committed transaction during the open-loop phase, ms. */
  txnMedianMs: number;
  rate: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  received: number;
  sent: number;
}

const kafka = new Kafka({ clientId: "pipeline-bench", brokers, logLevel: logLevel.NOTHING });
let seq = 0;

async function scenario(profile: ModelProfile, commitIntervalMs: number): Promise<Row> {
  const base = `bench-pipe-${Date.now().toString(36)}-${seq++}`;
  const layout = {
    requests: [`${base}.requests`],
    results: `${base}.results`,
    deadLetters: `${base}.dlq`,
    dedupChangelog: `${base}.dedup`,
    partitions: PARTITIONS,
    replicationFactor: 1,
  };
  await ensureTopics(kafka, layout);
  const topic = `${base}.requests`;
  const producer = kafka.producer();
  await producer.connect();
  const text = (i: number) => profile.texts[i % profile.texts.length] as string;
  // Drain phase input.
  for (let i = 0; i < profile.drainRecords; i += 500) {
    const n = Math.min(500, profile.drainRecords - i);
    await producer.send({
      topic,
      messages: Array.from({ length: n }, (_, k) => {
        const id = `d-${i + k}`;
        return { key: id, ...encodeRequest({ id, text: text(i + k) }, "json") };
      }),
    });
  }

  const arrivals = new Map<string, number>();
  const reader = kafka.consumer({ groupId: `${base}-reader`, readUncommitted: false, maxWaitTimeInMs: 20 });
  await reader.connect();
  await reader.subscribe({ topic: layout.results, fromBeginning: true });
  await reader.run({
    eachMessage: async ({ message }) => {
      if (message.key) arrivals.set(message.key.toString(), performance.timeOrigin + performance.now());
    },
  });

  const events = new SluiceEvents();
  let transactions = 0;
  const txnMs: number[] = [];
  events.on("transaction.finished", (e) => {
    if (e.outcome !== "committed") return;
    transactions++;
    txnMs.push(e.durationMs);
  });
  let batches = 0;
  let batchItems = 0;
  events.on("batch.inferred", (e) => {
    batches++;
    batchItems += e.size;
  });
  const processor = new StreamProcessor({
    kafka,
    model: profile.runner,
    events,
    groupId: `${base}-group`,
    requestTopics: layout.requests,
    resultsTopic: layout.results,
    deadLetterTopic: layout.deadLetters,
    dedupChangelogBase: layout.dedupChangelog,
    commitIntervalMs,
    maxBatchSize: 32,
    maxWaitMs: 10,
  });
  await processor.start();
  const drained = () => {
    let n = 0;
    for (const k of arrivals.keys()) if (k.startsWith("d-")) n++;
    return n;
  };
  while (drained() < profile.drainRecords) await sleep(20);
  const drainTimes = [...arrivals.entries()].filter(([k]) => k.startsWith("d-")).map(([, t]) => t);
  const drainMs = Math.max(...drainTimes) - Math.min(...drainTimes);
  const throughput = ((profile.drainRecords - 1) * 1000) / Math.max(1, drainMs);
  const drainBatchSize = batchItems / Math.max(1, batches);

  // Open-loop phase.
  const txBefore = transactions;
  txnMs.length = 0;
  const scheduled = new Map<string, number>();
  const total = Math.round(profile.ratePerSec * seconds);
  const t0 = Date.now() + 50;
  let next = 0;
  const sends: Promise<unknown>[] = [];
  while (next < total) {
    const now = Date.now();
    const due: { key: string; value: Buffer; headers: Record<string, string> }[] = [];
    while (next < total && t0 + (next * 1000) / profile.ratePerSec <= now) {
      const id = `l-${next}`;
      scheduled.set(id, t0 + (next * 1000) / profile.ratePerSec);
      due.push({ key: id, ...encodeRequest({ id, text: text(next) }, "json") });
      next++;
    }
    if (due.length > 0) sends.push(producer.send({ topic, messages: due }));
    await sleep(2);
  }
  await Promise.all(sends);
  const deadline = Date.now() + 30_000;
  const latencyArrived = () => [...scheduled.keys()].filter((k) => arrivals.has(k)).length;
  while (latencyArrived() < total && Date.now() < deadline) await sleep(50);
  const openLoopMs = Date.now() - t0;
  const h = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 600_000,
    numberOfSignificantValueDigits: 3,
  });
  let received = 0;
  for (const [id, at] of scheduled) {
    const arrived = arrivals.get(id);
    if (arrived === undefined) continue;
    received++;
    h.recordValue(Math.max(1, Math.round(arrived - at)));
  }
  const row: Row = {
    model: profile.label,
    commitIntervalMs,
    throughput,
    drainBatchSize,
    transactionsPerSec: ((transactions - txBefore) * 1000) / openLoopMs,
    txnMedianMs: [...txnMs].sort((a, b) => a - b)[Math.floor(txnMs.length / 2)] ?? Number.NaN,
    rate: profile.ratePerSec,
    p50: h.getValueAtPercentile(50),
    p99: h.getValueAtPercentile(99),
    p999: h.getValueAtPercentile(99.9),
    max: h.maxValue,
    received,
    sent: total,
  };
  h.destroy();
  await processor.close();
  await reader.disconnect();
  await producer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  await admin
    .deleteTopics({
      topics: [topic, layout.results, layout.deadLetters, `${layout.dedupChangelog}.${topic}`],
    })
    .catch(() => undefined);
  await admin.disconnect();
  process.stdout.write(`${JSON.stringify(row)}\n`);
  return row;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

const loadAtStart = loadavg()[0] ?? 0;
const dir = await mkdtemp(join(tmpdir(), "sluice-pipeline-bench-"));
const profiles: ModelProfile[] = [];
const rows: Row[] = [];
try {
  const corpus = loadCorpus(500);
  if (models.includes("tiny")) {
    const tiny = await createTinyModel(dir, { task: "embedding" });
    profiles.push({
      label: "tiny (4-dim test model)",
      runner: await ModelRunner.create({
        modelPath: tiny.modelPath,
        tokenizerPath: tiny.tokenizerPath,
        name: "tiny",
      }),
      drainRecords: Number(process.env.BENCH_TINY_RECORDS ?? 5000),
      ratePerSec: Number(process.env.BENCH_TINY_RATE ?? 300),
      texts: [
        "the cat sat on the mat",
        "a very good movie",
        "the dog is bad",
        "great",
        "awful movie is awful",
      ],
    });
  }
  if (models.includes("default")) {
    const files = await ensureDefaultModel();
    profiles.push({
      label: "default (BGE-small int8)",
      runner: await ModelRunner.create({
        modelPath: files.modelPath,
        tokenizerPath: files.tokenizerPath,
        name: files.name,
      }),
      drainRecords: Number(process.env.BENCH_DEFAULT_RECORDS ?? 1000),
      ratePerSec: Number(process.env.BENCH_DEFAULT_RATE ?? 40),
      texts: corpus,
    });
  }
  for (const p of profiles) {
    await p.runner.run(p.texts.slice(0, 32)); // warm-up
    for (const interval of intervals) rows.push(await scenario(p, interval));
  }
  const f = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "-");
  const md = `## Streaming pipeline (\`bench/pipeline-bench.ts\`)

In-process \`StreamProcessor\` against a local Kafka broker (${brokers.join(",")}); ${PARTITIONS} input partitions,
batch size 32, maxWaitMs 10, 2 batches in flight, 1 worker × 1 intra-op thread, ${cpus().length} CPUs (shared
with the broker and the load generator), Node ${process.version}, ${new Date().toISOString().slice(0, 10)}.
*Drain*: pre-produced requests, records/s between the first and last result a read_committed reader sees.
*Open loop*: constant arrival rate for ${seconds} s; latency = read_committed arrival − scheduled send time (ms,
HDR histogram, no coordinated omission). One run per row; the machine was shared (1-min load average
${loadAtStart.toFixed(1)} at start, ${(loadavg()[0] ?? 0).toFixed(1)} at the end), so treat differences under ~30 % as noise.

| Model | commitIntervalMs | drain rec/s | drain mean batch | open-loop rate/s | txn commits/s | txn median ms | p50 ms | p99 ms | p99.9 ms | max ms | received |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows
  .map(
    (r) =>
      `| ${r.model} | ${r.commitIntervalMs} | ${f(r.throughput)} | ${r.drainBatchSize.toFixed(1)} | ${r.rate} | ${r.transactionsPerSec.toFixed(1)} | ${f(r.txnMedianMs)} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.p999)} | ${f(r.max)} | ${r.received}/${r.sent} |`,
  )
  .join("\n")}

Reading: \`commitIntervalMs\` 0 commits as soon as anything completes (at most one transaction in flight
per partition; what completes meanwhile joins the next one). Larger intervals amortise the per-transaction
round trips over more records, but results become visible only at commit, so the interval adds to
end-to-end latency (about half the interval at p50). With the tiny model the drain takes well under a
second, so its records/s are quantised by the commit cadence. Compare the drain column only for the
default model, where inference is the bottleneck.
`;
  process.stdout.write(md);
  await writeBenchmarkSection("pipeline", md);
} finally {
  for (const p of profiles) await p.runner.close();
  await rm(dir, { recursive: true, force: true });
}
