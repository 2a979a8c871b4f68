/**
 * Tracing benchmark (issue 32): what OpenTelemetry tracing costs `sluice serve`, side by side in one
 * run: tracing off, on at 100 % sampling and on at 10 % (`parentbased_traceidratio`), for two models:
 * the tiny generated ONNX model (test/support/tiny-onnx.ts: inference costs next to nothing, so the
 * pipeline runs at its ceiling and tracing's share is the largest it gets) and the default model
 * (BGE-small int8). The real `sluice serve` runs as a child process (`node bin/sluice.js serve`) per
 * variant, on fresh topics and a fresh group, against a real broker (KAFKA_BROKERS, or the project's
 * LocalBroker). Spans go to a Zipkin-compatible sink in this process that reads each export and
 * answers 202, so the figures are Sluice's cost, not a collector's on the same two cores.
 *
 *  1. Throughput: a pre-produced backlog drained, results/s between the 10 % and the 90 % result a
 *     read_committed reader sees; serve's CPU (utime + stime from /proc) per 1000 results.
 *  2. Online latency: open-loop constant-rate requests at a quarter of the tracing-off drain rate of
 *     the same model; latency = read_committed arrival − scheduled send time (HDR histogram, coordinated
 *     omission avoided by construction), p50 and p99.
 *  3. Spans exported and dropped, from serve's /metrics (`sluice_tracing_spans_total`).
 *
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:tracing markers.
 *
 *   npm run bench:tracing
 *   env: KAFKA_BROKERS; BENCH_TRACING_TINY_RECORDS (20000), BENCH_TRACING_MODEL_RECORDS (1500),
 *        BENCH_TRACING_OPEN_SECONDS (20), BENCH_TRACING_ROUNDS (1: each variant this many times,
 *        interleaved), BENCH_TRACING_MODELS ("tiny,default"), BENCH_TRACING_OUTPUT (BENCHMARKS.md;
 *        "-" prints the section only), BENCH_TRACING_NODE_ARGS (node flags for serve, e.g. a CPU profile)
 *   smoke: BENCH_TRACING_TINY_RECORDS=2000 BENCH_TRACING_MODEL_RECORDS=100 BENCH_TRACING_OPEN_SECONDS=3 \
 *          BENCH_TRACING_OUTPUT=- npm run bench:tracing
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { changelogTopicFor, ensureTopics } from "../src/kafka/client/topic-admin.js";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { createTinyModel, TINY_POISON_WORD, tinyModelEnv } from "../test/support/tiny-onnx.js";
import { ArrivalReader } from "./arrival-reader.js";
import { benchBroker } from "./bench-broker.js";
import { loadCorpus } from "./corpus.js";
import { runOpenLoop } from "./open-loop.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const TINY_RECORDS = num("BENCH_TRACING_TINY_RECORDS", 20_000);
const MODEL_RECORDS = num("BENCH_TRACING_MODEL_RECORDS", 1500);
const OPEN_SECONDS = num("BENCH_TRACING_OPEN_SECONDS", 20);
const ROUNDS = num("BENCH_TRACING_ROUNDS", 1);
const MODELS = (process.env.BENCH_TRACING_MODELS ?? "tiny,default").split(",").filter(Boolean);
const OUTPUT = process.env.BENCH_TRACING_OUTPUT ?? "";
const PARTITIONS = 3;
/** Open-loop rate as a share of the model's tracing-off drain rate: well below saturation. */
const OPEN_FRACTION = 0.25;
const ROOT = resolve(import.meta.dirname, "..");
const SLUICE = join(ROOT, "bin", "sluice.js");

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

interface Variant {
  label: string;
  env: Record<string, string>;
}

const variants = (endpoint: string): Variant[] => {
  const on = { OTEL_TRACES_EXPORTER: "zipkin", OTEL_EXPORTER_ZIPKIN_ENDPOINT: endpoint };
  return [
    { label: "off", env: { OTEL_TRACES_EXPORTER: "none" } },
    { label: "on, 100 %", env: { ...on, OTEL_TRACES_SAMPLER: "parentbased_always_on" } },
    {
      label: "on, 10 %",
      env: { ...on, OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" },
    },
  ];
};

interface Row {
  model: string;
  variant: string;
  drained: number;
  perSec: number;
  cpuMsPerK: number;
  openRate: number;
  p50: number;
  p99: number;
  received: number;
  sent: number;
  exported: number;
  dropped: number;
}

/** A Zipkin-compatible span sink: reads each POST to the end and answers 202 (counts the bytes). */
async function spanSink(): Promise<{ endpoint: string; bytes: () => number; close(): Promise<void> }> {
  let bytes = 0;
  const server: Server = createServer((req, res) => {
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on("end", () => res.writeHead(202).end());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}/api/v2/spans`,
    bytes: () => bytes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** utime + stime of a process, ms (Linux /proc; NaN elsewhere). */
function cpuMsOf(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ = 100 on Linux
  } catch {
    return Number.NaN;
  }
}

async function metricsOf(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^(sluice_tracing_spans_total\{[^}]*outcome="(\w+)"[^}]*\})\s+(\S+)/.exec(line);
    if (m) out.set(m[2] as string, Number(m[3]));
  }
  return out;
}

async function startServe(env: Record<string, string>, port: number, logPath: string): Promise<ChildProcess> {
  const out = createWriteStream(logPath);
  // BENCH_TRACING_NODE_ARGS: node flags for serve, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_TRACING_NODE_ARGS ?? "").split(" ").filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, SLUICE, "serve"], {
    cwd: ROOT,
    env: { ...process.env, ...env, SLUICE_OBSERVABILITY__METRICS_PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.pipe(out);
  let err = "";
  child.stderr?.on("data", (d: Buffer) => {
    out.write(d);
    err = (err + d.toString()).slice(-4000);
  });
  const until = Date.now() + 180_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`sluice serve exited ${child.exitCode}: ${err}`);
    if (Date.now() > until) throw new Error(`sluice serve not ready in 180 s: ${err}`);
    try {
      if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return child;
    } catch {
      // not listening yet
    }
    await sleep(250);
  }
}

async function stopServe(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  await exited;
  clearTimeout(timer);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const broker = await benchBroker();
  fixAbortedTransactionOrder();
  const kafka = new Kafka({ clientId: "tracing-bench", brokers: broker.brokers, logLevel: logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  const sink = await spanSink();
  const dir = await mkdtemp(join(tmpdir(), "sluice-tracing-bench-"));
  // The tiny model fails its poison word on purpose (a model error, a dead letter): leave it out, so
  // every request of every row ends as a result.
  const texts = loadCorpus(Math.max(TINY_RECORDS, MODEL_RECORDS)).filter(
    (t) => !t.toLowerCase().includes(TINY_POISON_WORD),
  );
  const text = (i: number) => texts[i % texts.length] as string;
  const tiny = await createTinyModel(dir, { task: "embedding" });
  const modelEnv: Record<string, Record<string, string>> = { tiny: tinyModelEnv(tiny), default: {} };
  const tag = Date.now().toString(36);
  const rows: Row[] = [];
  let seq = 0;
  const children = new Set<ChildProcess>();
  // Stopped from outside (Ctrl-C, a timeout): no serve process is left behind.
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => {
      for (const child of children) child.kill("SIGKILL");
      process.exit(130);
    });
  try {
    for (const model of MODELS) {
      const records = model === "tiny" ? TINY_RECORDS : MODEL_RECORDS;
      let offRate = Number.NaN;
      for (let round = 0; round < ROUNDS; round++) {
        for (const variant of variants(sink.endpoint)) {
          const base = `bench-trace-${tag}-${seq++}`;
          const topic = `${base}.requests`;
          const group = `${base}-group`;
          await ensureTopics(kafka, {
            requests: [topic],
            results: `${base}.results`,
            deadLetters: `${base}.dlq`,
            dedupChangelog: `${base}.dedup`,
            groupId: group,
            freshness: `${base}.freshness`,
            partitions: PARTITIONS,
            replicationFactor: 1,
          });
          for (let i = 0; i < records; i += 1000) {
            await producer.send({
              topic,
              messages: Array.from({ length: Math.min(1000, records - i) }, (_, j) => {
                const id = `b${i + j}`;
                return { key: id, ...encodeRequest({ id, text: text(i + j) }, "json") };
              }),
            });
          }
          const reader = new ArrivalReader(kafka, `${base}.results`, `${base}-reader`);
          await reader.start();
          const port = 19_000 + Math.floor(Math.random() * 900);
          log(`${model} / tracing ${variant.label}: ${records} records, starting sluice serve`);
          const child = await startServe(
            {
              ...modelEnv[model],
              ...variant.env,
              KAFKA_BROKERS: broker.brokers.join(","),
              SLUICE_TOPICS__REQUESTS: topic,
              SLUICE_TOPICS__RESULTS: `${base}.results`,
              SLUICE_TOPICS__DEAD_LETTERS: `${base}.dlq`,
              SLUICE_TOPICS__DEDUP_CHANGELOG: `${base}.dedup`,
              SLUICE_TOPICS__FRESHNESS: `${base}.freshness`,
              SLUICE_CONSUMER__GROUP_ID: group,
              SLUICE_DELIVERY__DEFAULT_TIMEOUT_MS: "3600000",
              SLUICE_OBSERVABILITY__LOG_LEVEL: "warn",
              SLUICE_OBSERVABILITY__UI: "false",
            },
            port,
            join(dir, `${base}.log`),
          );
          children.add(child);
          const cpuBefore = cpuMsOf(child.pid);
          if (!(await reader.waitFor("b", records, 600_000)))
            throw new Error(
              `${reader.count("b")} of ${records} results in 600 s (log: ${join(dir, `${base}.log`)})`,
            );
          const cpuAfter = cpuMsOf(child.pid);
          const times = reader.times("b");
          const lo = times[Math.floor(times.length * 0.1)] as number;
          const hi = times[Math.floor(times.length * 0.9) - 1] as number;
          const perSec = (0.8 * times.length - 1) / ((hi - lo) / 1000);
          if (variant.label === "off" && round === 0) offRate = perSec;
          const openRate = Math.max(1, Math.round(offRate * OPEN_FRACTION));
          log(`  drained at ${perSec.toFixed(0)}/s; open loop at ${openRate}/s for ${OPEN_SECONDS} s`);
          const open = await runOpenLoop({
            producer,
            topic,
            reader,
            prefix: "o",
            rate: openRate,
            seconds: OPEN_SECONDS,
            text,
          });
          await sleep(1500); // one export interval and a bit, so the counters include the window
          const counts = await metricsOf(port).catch(() => new Map<string, number>());
          await stopServe(child);
          children.delete(child);
          await reader.stop();
          rows.push({
            model,
            variant: variant.label,
            drained: times.length,
            perSec,
            cpuMsPerK: ((cpuAfter - cpuBefore) / times.length) * 1000,
            openRate,
            p50: open.p50,
            p99: open.p99,
            received: open.received,
            sent: open.sent,
            exported: counts.get("exported") ?? 0,
            dropped: counts.get("dropped") ?? 0,
          });
          log(`  p50 ${open.p50} ms, p99 ${open.p99} ms; spans exported ${counts.get("exported") ?? 0}`);
          const admin = kafka.admin();
          await admin.connect();
          await admin
            .deleteTopics({
              topics: [
                topic,
                `${base}.results`,
                `${base}.dlq`,
                `${base}.freshness`,
                changelogTopicFor(`${base}.dedup`, group, topic),
              ],
            })
            .catch(() => undefined);
          await admin.disconnect();
        }
      }
    }
  } finally {
    for (const child of children) child.kill("SIGKILL");
    await producer.disconnect();
    await sink.close();
    await rm(dir, { recursive: true, force: true });
    await broker.stop();
  }
  const section = report(rows, startedAt, broker.note, sink.bytes());
  if (OUTPUT === "-") process.stdout.write(`${section}\n`);
  else await writeBenchmarkSection("tracing", section, OUTPUT || undefined);
}

function report(rows: Row[], startedAt: Date, brokerNote: string, sinkBytes: number): string {
  const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "n/a");
  const table = rows.map((r) => {
    const off = rows.find((o) => o.model === r.model && o.variant === "off");
    const ratio = off ? r.perSec / off.perSec : Number.NaN;
    return `| ${r.model === "tiny" ? "tiny (ceiling)" : "default (BGE-small int8)"} | ${r.variant} | ${f0(r.perSec)} | ${Number.isFinite(ratio) ? ratio.toFixed(2) : "n/a"} | ${f0(r.cpuMsPerK)} | ${r.openRate} | ${r.p50} | ${r.p99} | ${r.received}/${r.sent} | ${r.exported} | ${r.dropped} |`;
  });
  return `## Tracing (\`npm run bench:tracing\`)

The cost of OpenTelemetry tracing (docs/observability.md, "Tracing") to \`sluice serve\`: tracing off,
on with every trace sampled, and on at 10 %, side by side in one run, for the tiny generated model
(inference costs next to nothing: the pipeline's ceiling, where tracing's share is largest) and the
default model.

Run ${startedAt.toISOString()}: ${machineDescription()} (the load average as the run ended). The
figures move by several percent between runs on this 2-core machine; compare rows of one run, not
runs. Broker: ${brokerNote}. Each row is
a fresh \`sluice serve\` process (\`node bin/sluice.js serve\`, defaults but
\`delivery.defaultTimeoutMs: 3600000\`, log level warn, no live page) on fresh topics
(${PARTITIONS} partitions) and group, in the order listed${ROUNDS > 1 ? `, ${ROUNDS} rounds interleaved` : ""}.
Drain: a pre-produced backlog (${TINY_RECORDS} records for the tiny model, ${MODEL_RECORDS} for the
default model, corpus sentences), results/s between the 10 % and 90 % result a read_committed
reader sees, and serve's CPU (user + system, all threads) per 1000 results over the drain. Online:
open-loop requests for ${OPEN_SECONDS} s at ${OPEN_FRACTION * 100} % of the model's tracing-off drain rate, latency =
read_committed arrival − scheduled send time. Requests carry no \`traceparent\`, so the root sampler
decides (10 %: \`parentbased_traceidratio\`, \`OTEL_TRACES_SAMPLER_ARG=0.1\`). Spans go to a
Zipkin-compatible sink in the benchmark process that reads each export and answers 202
(${(sinkBytes / 1e6).toFixed(0)} MB of span JSON in all), so a collector's own CPU is not charged to
Sluice; exported and dropped are serve's \`sluice_tracing_spans_total\` at the end of its row (the
default export queue: 2048 spans, 512 per export, every 5 s at the latest).

| model | tracing | drain results/s | × off | serve CPU ms / 1k results | open-loop rate/s | p50 ms | p99 ms | received | spans exported | spans dropped |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${table.join("\n")}
`;
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
