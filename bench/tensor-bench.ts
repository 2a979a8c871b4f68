/**
 * Tensor model benchmark (issue 20): the tiny logistic regression and tree classifier of the tests.
 *
 *  1. Raw ORT: one onnxruntime-node session on this thread (one intra-op thread, as a worker runs it),
 *     rows/s at 1 row per `session.run` against 8/32/128 rows stacked per call.
 *  2. Sluice end to end, transactions on, `sluice serve`'s defaults with topics.requestCodec and
 *     resultCodec v2-json: a pre-produced backlog of MLServer-shaped iris requests (one row each)
 *     drained by an in-process StreamProcessor, results/s between the first and last result a
 *     read_committed reader sees.
 *  3. The no-op model (src/model/noop-model.ts) on the same path, same codec (a BYTES V2 request):
 *     the Kafka ceiling, in the same run.
 * Each measurement is repeated (BENCH_REPEATS, default 3), interleaved, median and worst reported.
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:tensor markers.
 *
 *   KAFKA_BROKERS=127.0.0.1:19092 node --import tsx bench/tensor-bench.ts
 *   env: BENCH_RECORDS (10000 per drain), BENCH_RAW_ROWS (20000), BENCH_REPEATS (5)
 */
import { mkdtemp } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import * as ort from "onnxruntime-node";
import { createStreamProcessor } from "../src/app/stream-processor-factory.js";
import { loadConfig } from "../src/config/index.js";
import { modelSettings } from "../src/config/model-settings.js";
import { SluiceEvents } from "../src/events/sluice-events.js";
import { ensureTopics } from "../src/kafka/client/topic-admin.js";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import type { ModelPort } from "../src/model/model-port.js";
import { NoopModel } from "../src/model/noop-model.js";
import { TensorModelRunner } from "../src/model/tensor-model-runner.js";
import { processorOptionsFromConfig } from "../src/processor/stream-processor-options.js";
import { createTinyTensorModels } from "../test/support/tiny-tensor-onnx.js";
import { ArrivalReader } from "./arrival-reader.js";
import { benchBroker } from "./bench-broker.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const RECORDS = num("BENCH_RECORDS", 10_000);
const RAW_ROWS = num("BENCH_RAW_ROWS", 20_000);
const REPEATS = num("BENCH_REPEATS", 5);
const STACKS = [1, 8, 32, 128];
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const worst = (xs: number[]) => Math.min(...xs);

/** rows/s of `session.run` with `stack` rows per call, closed loop on this thread. */
async function rawOrt(path: string, stack: number): Promise<number> {
  const session = await ort.InferenceSession.create(path, {
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: "sequential",
    extra: { session: { intra_op: { allow_spinning: "0" } } },
  });
  const data = Float32Array.from({ length: stack * 4 }, (_, i) => (i % 7) * 0.9);
  const calls = Math.max(1, Math.ceil(RAW_ROWS / stack));
  for (let i = 0; i < 50; i++) await session.run({ predict: new ort.Tensor("float32", data, [stack, 4]) });
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) await session.run({ predict: new ort.Tensor("float32", data, [stack, 4]) });
  const perSec = (calls * stack * 1000) / (performance.now() - t0);
  await session.release();
  return perSec;
}

let seq = 0;
const runTag = Date.now().toString(36);

async function main(): Promise<void> {
  const load0 = loadavg();
  const broker = await benchBroker();
  const kafka = new Kafka({ clientId: "tensor-bench", brokers: broker.brokers, logLevel: logLevel.NOTHING });
  fixAbortedTransactionOrder();
  const config = loadConfig();
  const dir = await mkdtemp(join(tmpdir(), "sluice-tensor-bench-"));
  const paths = await createTinyTensorModels(dir);
  const models = { "logistic regression": paths.lr, "tree classifier": paths.treeStrings } as const;
  const producer = kafka.producer();
  await producer.connect();

  const irisRequest = (id: string, i: number) => ({
    id,
    inputs: [
      { name: "predict", shape: [1, 4], datatype: "FP32", data: [[i % 7, 3.5, (i % 5) + 0.5, i % 3]] },
    ],
  });
  const textRequest = (id: string) => ({
    id,
    inputs: [{ name: "text", shape: [1], datatype: "BYTES", data: ["x"] }],
  });

  /** Where a drain's time went, from the processor's own events. */
  interface Breakdown {
    meanBatch: number;
    /** Σ batch inference wall time ÷ drain wall time (batches overlap, so it can exceed 1). */
    modelShare: number;
    commitsPerSec: number;
    commitMedianMs: number;
  }
  const breakdowns: Record<string, Breakdown[]> = {};

  /** Results/s (first → last arrival) of a backlog drained with transactions on. */
  const drain = async (
    label: string,
    model: ModelPort,
    body: (id: string, i: number) => object,
  ): Promise<number> => {
    const base = `bench-tensor-${runTag}-${seq++}`;
    const l = {
      requestTopic: `${base}.requests`,
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      groupId: `${base}-group`,
    };
    await ensureTopics(kafka, {
      requests: [l.requestTopic],
      results: l.results,
      deadLetters: l.deadLetters,
      dedupChangelog: l.dedupChangelog,
      groupId: l.groupId,
      partitions: 3,
      replicationFactor: 1,
    });
    for (let i = 0; i < RECORDS; i += 1000) {
      const k = Math.min(1000, RECORDS - i);
      await producer.send({
        topic: l.requestTopic,
        messages: Array.from({ length: k }, (_, j) => {
          const id = `d-${i + j}`;
          return {
            key: id,
            value: JSON.stringify(body(id, i + j)),
            headers: { "content-type": "application/json" },
          };
        }),
      });
    }
    const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
    await reader.start();
    const events = new SluiceEvents();
    let batches = 0;
    let items = 0;
    let inferMs = 0;
    const commitMs: number[] = [];
    events.on("microbatch.inferred", (e) => {
      if (e.size === 0) return;
      batches++;
      items += e.size;
      inferMs += e.inferenceMs;
    });
    events.on("transaction.finished", (e) => {
      if (e.outcome === "committed") commitMs.push(e.durationMs);
    });
    const processor = createStreamProcessor({
      ...processorOptionsFromConfig(config, { kafka, model, events }),
      groupId: l.groupId,
      requestTopics: [l.requestTopic],
      resultsTopic: l.results,
      deadLetterTopic: l.deadLetters,
      dedupChangelogBase: l.dedupChangelog,
      defaultTimeoutMs: 3_600_000,
      transactions: true,
      requestCodec: "v2-json",
      resultCodec: "v2-json",
    });
    await processor.start();
    while (!processor.readiness().ready) await sleep(5);
    const done = await reader.waitFor("d-", RECORDS, 600_000);
    const { first, last } = reader.span("d-");
    await processor.close();
    await reader.stop();
    if (!done) log(`only ${reader.count("d-")}/${RECORDS} results arrived`);
    const wallMs = Math.max(1, last - first);
    breakdowns[label] ??= [];
    breakdowns[label].push({
      meanBatch: items / Math.max(1, batches),
      modelShare: inferMs / wallMs,
      commitsPerSec: (commitMs.length * 1000) / wallMs,
      commitMedianMs: median(commitMs.length > 0 ? commitMs : [Number.NaN]),
    });
    return ((reader.count("d-") - 1) * 1000) / wallMs;
  };

  const noop = new NoopModel();
  const runners: Record<string, TensorModelRunner> = {};
  for (const [name, path] of Object.entries(models)) {
    runners[name] = await TensorModelRunner.create(
      modelSettings({
        modelPath: path,
        tokenizerPath: "",
        task: "tensor",
        name,
        workers: config.model.workers,
      }),
    );
  }
  const raw: Record<string, Record<number, number[]>> = {};
  const e2e: Record<string, number[]> = { noop: [] };
  for (let r = 0; r < REPEATS; r++) {
    for (const [name, path] of Object.entries(models)) {
      raw[name] ??= {};
      for (const stack of STACKS) {
        const v = await rawOrt(path, stack);
        const runs = raw[name]!;
        runs[stack] ??= [];
        runs[stack].push(v);
        log(`raw ${name} ${stack} rows/call: ${v.toFixed(0)} rows/s`);
      }
    }
    const v = await drain("noop", noop, textRequest);
    e2e.noop!.push(v);
    log(`no-op ceiling: ${v.toFixed(0)}/s`);
    for (const name of Object.keys(models)) {
      const s = await drain(name, runners[name]!, irisRequest);
      e2e[name] ??= [];
      e2e[name].push(s);
      log(`sluice ${name}: ${s.toFixed(0)}/s`);
    }
  }
  for (const runner of Object.values(runners)) await runner.close();
  await producer.disconnect();
  await broker.stop();

  const fmt = (xs: number[]) => `${Math.round(median(xs))} (worst ${Math.round(worst(xs))})`;
  const ratio = (a: number[], b: number[]) => (median(a) / median(b)).toFixed(2);
  const lines = [
    "## Tensor models (`bench/tensor-bench.ts`)",
    "",
    `Run ${new Date().toISOString()}: ${machineDescription()}; load average at start ${load0.map((x) => x.toFixed(1)).join(" / ")}. ` +
      `${broker.note}. ${REPEATS} interleaved repeats, median (worst). On a shared machine absolute numbers move with the neighbours' load; ratios are taken within one run.`,
    "",
    "Raw onnxruntime-node, one session, one intra-op thread, rows/s:",
    "",
    `| model | ${STACKS.map((s) => `${s} row${s > 1 ? "s" : ""}/call`).join(" | ")} |`,
    `|---|${STACKS.map(() => "---").join("|")}|`,
    ...Object.keys(models).map(
      (name) =>
        `| ${name} | ${STACKS.map((s) => `${fmt(raw[name]![s]!)}${s > 1 ? ` ×${ratio(raw[name]![s]!, raw[name]![1]!)}` : ""}`).join(" | ")} |`,
    ),
    "",
    `Sluice end to end (\`sluice serve\` defaults, transactions on, V2 JSON in and out, ${RECORDS} one-row iris requests over 3 partitions, model.workers ${config.model.workers}), results/s:`,
    "",
    "| model | results/s | ÷ no-op ceiling | ÷ raw ORT at 1 row/call | ÷ raw ORT at 32 rows/call |",
    "|---|---|---|---|---|",
    `| no-op model (Kafka ceiling) | ${fmt(e2e.noop!)} | 1.00 | | |`,
    ...Object.keys(models).map(
      (name) =>
        `| ${name} | ${fmt(e2e[name]!)} | ${ratio(e2e[name]!, e2e.noop!)} | ${ratio(e2e[name]!, raw[name]![1]!)} | ${ratio(e2e[name]!, raw[name]![32]!)} |`,
    ),
  ];
  const b = (label: string, key: keyof Breakdown, digits: number) =>
    median(breakdowns[label]!.map((x) => x[key])).toFixed(digits);
  lines.push(
    "",
    "Where the time goes (medians over the repeats; from the processor's `microbatch.inferred` and `transaction.finished` events):",
    "",
    "| run | mean batch (requests) | Σ model call time ÷ wall | commits/s | commit median ms |",
    "|---|---|---|---|---|",
    ...["noop", ...Object.keys(models)].map(
      (label) =>
        `| ${label === "noop" ? "no-op model" : label} | ${b(label, "meanBatch", 1)} | ${b(label, "modelShare", 2)} | ${b(label, "commitsPerSec", 1)} | ${b(label, "commitMedianMs", 1)} |`,
    ),
  );
  await writeBenchmarkSection("tensor", lines.join("\n"));
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
