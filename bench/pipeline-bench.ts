/**
 * Streaming pipeline benchmark (issue 4): how close `sluice serve` gets to the raw model, what the
 * Kafka side costs, and end-to-end latency under open-loop load. One run, the default model, the same
 * real texts (`loadCorpus`), a real broker (KAFKA_BROKERS, or the project's LocalBroker started here).
 *
 *  1. Sustained throughput: a pre-produced backlog drained by an in-process StreamProcessor (config
 *     defaults of `sluice serve`), results/s between the first and the last result a read_committed
 *     reader sees; transactions on, then off (at-least-once).
 *  2. Raw model: `TextModelRunner.run` in a closed loop over the same texts at the mean batch size the
 *     transactional run reached, with as many batches in flight as the processor allows. Measured twice
 *     (after the transactional drain and after the baseline) to bracket machine drift.
 *  3. Per-message baseline: a kafkajs `eachMessage` consumer that runs the model on one record and
 *     awaits one produced result per message (what a first consumer looks like).
 *  4. No-op model (src/model/noop-model.ts): the Kafka ceiling, transactions on and off.
 *  5. Latency: open-loop constant-rate load at 25/50/75 % of the transactional drain rate (requests are
 *     due on a fixed schedule whether or not earlier ones finished). Latency = read_committed arrival −
 *     *scheduled* send time, recorded in an HDR histogram, so a stall is charged to every request it
 *     delays (coordinated omission avoided by construction). Plus commitIntervalMs 0 and 500 at 50 %.
 *
 * Measures, never asserts. Writes its section of BENCHMARKS.md between the bench:pipeline markers.
 *
 *   npm run bench:pipeline
 *   env: KAFKA_BROKERS; BENCH_RECORDS (3000, model drains), BENCH_NOOP_RECORDS (50000),
 *        BENCH_BASELINE_RECORDS (600), BENCH_OPEN_SECONDS (30), BENCH_INTERVAL_SECONDS (20),
 *        BENCH_INTERVALS ("0,500"; "" skips the commit-interval rows)
 */
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Kafka, logLevel } from "kafkajs";
import { createStreamProcessor } from "../src/app/stream-processor-factory.js";
import { loadConfig, maxBatchSize } from "../src/config/index.js";
import { encodeRequest, RequestDecoder } from "../src/contracts/request-codec.js";
import { ResultEncoder } from "../src/contracts/result-codec.js";
import { routeOutcome } from "../src/delivery/result-builder.js";
import { SluiceEvents } from "../src/events/sluice-events.js";
import { changelogTopicFor, ensureTopics } from "../src/kafka/client/topic-admin.js";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import type { ModelPort } from "../src/model/model-port.js";
import { modelRunnerOptionsFromConfig } from "../src/model/model-runner-config.js";
import { NoopModel } from "../src/model/noop-model.js";
import { TextModelRunner } from "../src/model/text-model-runner.js";
import { processorOptionsFromConfig } from "../src/processor/stream-processor-options.js";
import { ArrivalReader } from "./arrival-reader.js";
import { benchBroker } from "./bench-broker.js";
import { loadCorpus } from "./corpus.js";
import { type OpenLoopLatency, runOpenLoop } from "./open-loop.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const RECORDS = num("BENCH_RECORDS", 3000);
const NOOP_RECORDS = num("BENCH_NOOP_RECORDS", 50_000);
const BASELINE_RECORDS = num("BENCH_BASELINE_RECORDS", 600);
const OPEN_SECONDS = num("BENCH_OPEN_SECONDS", 30);
const INTERVAL_SECONDS = num("BENCH_INTERVAL_SECONDS", 20);
const EXTRA_INTERVALS = (process.env.BENCH_INTERVALS ?? "0,500")
  .split(",")
  .filter((s) => s.trim() !== "")
  .map(Number);
const LOAD_FRACTIONS = [0.25, 0.5, 0.75];
const PARTITIONS = 3;
// Far above any drain: a backlog record must never expire (an expired result skips the model).
const DEFAULT_TIMEOUT_MS = 3_600_000;

const now = () => performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Layout {
  requestTopic: string;
  results: string;
  deadLetters: string;
  dedupChangelog: string;
  groupId: string;
}

interface DrainStats {
  batches: number;
  items: number;
  commits: number;
  notOk: number;
  commitMs: number[];
}

interface DrainRow {
  label: string;
  records: number;
  received: number;
  /** Results ÷ (last arrival − ready). */
  perSec: number;
  /** Between the arrivals of the 10 % and the 90 % result: start-up and the last commit excluded. */
  sustainedPerSec: number;
  perCpuSec: number;
  /** Share of the machine's CPU time that was busy (all processes) during the drain. */
  machineBusy: number;
  meanBatch: number;
  commitsPerSec: number;
  commitMedianMs: number;
  /** Main-thread event-loop delay during the drain, p99 ms: how late worker replies get handled. */
  loopDelayP99Ms: number;
  notOk: number;
}

/** Busy and total jiffies of all CPUs (Linux /proc/stat); undefined elsewhere. */
function cpuTicks(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    const total = v.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

function busyShare(a: ReturnType<typeof cpuTicks>, b: ReturnType<typeof cpuTicks>): number {
  if (!a || !b || b.total <= a.total) return Number.NaN;
  return (b.busy - a.busy) / (b.total - a.total);
}

interface RawRun {
  perSec: number;
  perCpuSec: number;
  machineBusy: number;
}

interface LatencyRow extends OpenLoopLatency {
  label: string;
  commitIntervalMs: number;
  fraction: number;
  rate: number;
}

let seq = 0;
const runTag = Date.now().toString(36);

async function main(): Promise<void> {
  const loadStart = loadavg();
  const startedAt = new Date();
  const broker = await benchBroker();
  const { brokers } = broker;
  const brokerNote = broker.note;
  const kafka = new Kafka({ clientId: "pipeline-bench", brokers, logLevel: logLevel.NOTHING });
  fixAbortedTransactionOrder();
  const config = loadConfig();
  const runner = await TextModelRunner.create(
    await modelRunnerOptionsFromConfig(config, (line) => process.stderr.write(`[model] ${line}\n`)),
  );
  const noop = new NoopModel();
  const texts = loadCorpus(Math.max(RECORDS, BASELINE_RECORDS));
  const text = (i: number) => texts[i % texts.length] as string;
  const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
  const producer = kafka.producer();
  await producer.connect();

  const newLayout = async (tag: string): Promise<Layout> => {
    const base = `bench-pipe-${runTag}-${seq++}-${tag}`;
    await ensureTopics(kafka, {
      requests: [`${base}.requests`],
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      groupId: `${base}-group`,
      partitions: PARTITIONS,
      replicationFactor: 1,
    });
    return {
      requestTopic: `${base}.requests`,
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      groupId: `${base}-group`,
    };
  };
  const dropLayout = async (l: Layout) => {
    const admin = kafka.admin();
    await admin.connect();
    await admin
      .deleteTopics({
        topics: [
          l.requestTopic,
          l.results,
          l.deadLetters,
          changelogTopicFor(l.dedupChangelog, l.groupId, l.requestTopic),
        ],
      })
      .catch(() => undefined);
    await admin.disconnect();
  };
  const preProduce = async (topic: string, prefix: string, n: number) => {
    for (let i = 0; i < n; i += 1000) {
      const k = Math.min(1000, n - i);
      await producer.send({
        topic,
        messages: Array.from({ length: k }, (_, j) => {
          const id = `${prefix}${i + j}`;
          return { key: id, ...encodeRequest({ id, text: text(i + j) }, "json") };
        }),
      });
    }
  };

  /** A StreamProcessor with `sluice serve`'s configuration defaults on private topics. */
  const startProcessor = async (
    l: Layout,
    model: ModelPort,
    transactions: boolean,
    commitIntervalMs = config.delivery.commitIntervalMs,
  ) => {
    const events = new SluiceEvents();
    const stats: DrainStats = { batches: 0, items: 0, commits: 0, notOk: 0, commitMs: [] };
    events.on("microbatch.inferred", (e) => {
      if (e.size === 0) return;
      stats.batches++;
      stats.items += e.size;
    });
    events.on("transaction.finished", (e) => {
      if (e.outcome !== "committed") return;
      stats.commits++;
      stats.commitMs.push(e.durationMs);
    });
    events.on("record.outcome", (e) => {
      if (e.outcome !== "result" || e.status !== "ok") stats.notOk++;
    });
    const processor = createStreamProcessor({
      ...processorOptionsFromConfig(config, { kafka, model, events }),
      groupId: l.groupId,
      requestTopics: [l.requestTopic],
      resultsTopic: l.results,
      deadLetterTopic: l.deadLetters,
      dedupChangelogBase: l.dedupChangelog,
      defaultTimeoutMs: DEFAULT_TIMEOUT_MS,
      transactions,
      commitIntervalMs,
    });
    await processor.start();
    return { processor, stats, ready: () => processor.readiness().ready };
  };

  const drain = async (
    label: string,
    l: Layout,
    reader: ArrivalReader,
    n: number,
    start: () => Promise<{ stats: DrainStats; ready: () => boolean }>,
  ): Promise<DrainRow> => {
    const prefix = "d-";
    await preProduce(l.requestTopic, prefix, n);
    log(`${label}: ${n} records pre-produced, draining`);
    const { stats, ready } = await start();
    // The window starts when the consumer owns its partitions (group joined, state restored) and ends
    // with the last result: group join and restore are start-up, not throughput.
    while (!ready()) await sleep(5);
    const t0 = now();
    const cpu0 = process.cpuUsage();
    const ticks0 = cpuTicks();
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    const commits0 = stats.commits;
    stats.commitMs.length = 0;
    const done = await reader.waitFor(prefix, n, 600_000);
    const cpu = process.cpuUsage(cpu0);
    const ticks1 = cpuTicks();
    loop.disable();
    const { last } = reader.span(prefix);
    const times = reader.times(prefix);
    const i10 = Math.floor(times.length * 0.1);
    const i90 = Math.max(i10 + 1, Math.ceil(times.length * 0.9) - 1);
    const sustainedPerSec =
      times.length > 10
        ? ((i90 - i10) * 1000) / Math.max(1e-3, (times[i90] as number) - (times[i10] as number))
        : Number.NaN;
    const commitMs = [...stats.commitMs].sort((a, b) => a - b);
    const seconds = (last - t0) / 1000;
    const received = reader.count(prefix);
    const row: DrainRow = {
      label,
      records: n,
      received,
      perSec: received / Math.max(seconds, 1e-3),
      sustainedPerSec,
      machineBusy: busyShare(ticks0, ticks1),
      commitMedianMs: commitMs[Math.floor(commitMs.length / 2)] ?? Number.NaN,
      loopDelayP99Ms: loop.percentile(99) / 1e6,
      perCpuSec: received / Math.max((cpu.user + cpu.system) / 1e6, 1e-3),
      meanBatch: stats.items / Math.max(1, stats.batches),
      commitsPerSec: (stats.commits - commits0) / Math.max(seconds, 1e-3),
      notOk: stats.notOk,
    };
    if (!done) log(`${label}: only ${received}/${n} results arrived`);
    log(`${label}: ${JSON.stringify(row)}`);
    return row;
  };

  const openLoop = async (
    label: string,
    l: Layout,
    reader: ArrivalReader,
    fraction: number,
    rate: number,
    seconds: number,
    commitIntervalMs: number,
  ): Promise<LatencyRow> => {
    const latency = await runOpenLoop({
      producer,
      topic: l.requestTopic,
      reader,
      prefix: `o${seq++}-`,
      rate,
      seconds,
      text,
    });
    const row: LatencyRow = { label, commitIntervalMs, fraction, rate, ...latency };
    log(`${label}: ${JSON.stringify(row)}`);
    await sleep(1000); // let the pipeline settle between load levels
    return row;
  };

  /** Closed loop over the same texts, `batch` items per call, `inFlight` calls outstanding. */
  const raw = async (batch: number, inFlight: number): Promise<RawRun> => {
    const items = texts.slice(0, RECORDS);
    const batches: string[][] = [];
    for (let i = 0; i < items.length; i += batch) batches.push(items.slice(i, i + batch));
    const cpu0 = process.cpuUsage();
    const ticks0 = cpuTicks();
    const t0 = now();
    let nextBatch = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (nextBatch < batches.length) await runner.run(batches[nextBatch++] as string[]);
      }),
    );
    const ms = now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const r: RawRun = {
      perSec: (items.length * 1000) / ms,
      perCpuSec: items.length / ((cpu.user + cpu.system) / 1e6),
      machineBusy: busyShare(ticks0, cpuTicks()),
    };
    log(`raw batch ${batch}: ${JSON.stringify(r)}`);
    return r;
  };

  /** The per-message baseline: kafkajs eachMessage, one inference and one awaited send per record. */
  const baseline = async (l: Layout, reader: ArrivalReader): Promise<DrainRow> => {
    const decoder = new RequestDecoder({
      defaultCodec: "json",
      maxMessageBytes: config.delivery.maxMessageBytes,
    });
    const encoder = new ResultEncoder({ codec: "json" });
    const out = kafka.producer();
    await out.connect();
    const consumer = kafka.consumer({ groupId: l.groupId, readUncommitted: false });
    let calls = 0;
    let joined = false;
    consumer.on(consumer.events.GROUP_JOIN, () => {
      joined = true;
    });
    const row = await drain("per-message baseline", l, reader, BASELINE_RECORDS, async () => {
      await consumer.connect();
      await consumer.subscribe({ topic: l.requestTopic, fromBeginning: true });
      await consumer.run({
        eachMessage: async ({ topic, partition, message }) => {
          const decoded = decoder.decode(message.value ?? null, undefined, message.key ?? null);
          if (!decoded.ok) return;
          const { outcomes, stats } = await runner.run([decoded.request.text]);
          calls++;
          const route = routeOutcome(
            {
              request: decoded.request,
              source: { topic, partition, offset: message.offset },
              requestTimestamp: Number(message.timestamp),
              model: runner.identity,
              queueMs: 0,
              inferenceMs: stats.inferenceMs,
              batchSize: 1,
              completedAt: Date.now(),
            },
            outcomes[0] ?? { ok: false, code: "INFERENCE_FAILED", message: "no outcome" },
          );
          if (route.kind !== "result") return;
          const encoded = encoder.encode(route.result);
          await out.send({
            topic: l.results,
            messages: [{ key: decoded.request.id, value: encoded.value, headers: encoded.headers }],
          });
        },
      });
      return { stats: { batches: 0, items: 0, commits: 0, notOk: 0, commitMs: [] }, ready: () => joined };
    });
    await consumer.disconnect();
    await out.disconnect();
    return { ...row, meanBatch: calls > 0 ? 1 : 0 };
  };

  const drains: DrainRow[] = [];
  const latencies: LatencyRow[] = [];
  const raws: RawRun[] = [];
  let rawBatch = 0;
  let saturation = 0;
  try {
    log(`warming up the model (${runner.identity.name})`);
    await runner.run(texts.slice(0, 64));

    // 1. transactions on: drain → saturation; raw #1; open loop at 25/50/75 %.
    {
      const l = await newLayout("txn");
      const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
      await reader.start();
      let handle: Awaited<ReturnType<typeof startProcessor>> | undefined;
      const row = await drain("sluice, transactions on", l, reader, RECORDS, async () => {
        handle = await startProcessor(l, runner, true);
        return handle;
      });
      drains.push(row);
      saturation = row.perSec;
      rawBatch = Math.max(1, Math.round(row.meanBatch));
      raws.push(await raw(rawBatch, config.batching.maxInFlightBatches));
      for (const f of LOAD_FRACTIONS) {
        latencies.push(
          await openLoop(
            "sluice, transactions on",
            l,
            reader,
            f,
            Math.max(1, Math.round(saturation * f)),
            OPEN_SECONDS,
            config.delivery.commitIntervalMs,
          ),
        );
      }
      await handle?.processor.close();
      await reader.stop();
      await dropLayout(l);
    }

    // 2. transactions off (at-least-once): drain; open loop at 50 %.
    {
      const l = await newLayout("alo");
      const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
      await reader.start();
      let handle: Awaited<ReturnType<typeof startProcessor>> | undefined;
      drains.push(
        await drain("sluice, transactions off (at-least-once)", l, reader, RECORDS, async () => {
          handle = await startProcessor(l, runner, false);
          return handle;
        }),
      );
      latencies.push(
        await openLoop(
          "sluice, transactions off",
          l,
          reader,
          0.5,
          Math.max(1, Math.round(saturation * 0.5)),
          OPEN_SECONDS,
          config.delivery.commitIntervalMs,
        ),
      );
      await handle?.processor.close();
      await reader.stop();
      await dropLayout(l);
    }

    // 3. per-message baseline; raw #2.
    {
      const l = await newLayout("base");
      const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
      await reader.start();
      drains.push(await baseline(l, reader));
      await reader.stop();
      await dropLayout(l);
      raws.push(await raw(rawBatch, config.batching.maxInFlightBatches));
    }

    // 4. no-op model: the Kafka ceiling.
    for (const transactions of [true, false]) {
      const l = await newLayout(transactions ? "noop-txn" : "noop-alo");
      const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
      await reader.start();
      let handle: Awaited<ReturnType<typeof startProcessor>> | undefined;
      drains.push(
        await drain(
          `no-op model, transactions ${transactions ? "on" : "off"}`,
          l,
          reader,
          NOOP_RECORDS,
          async () => {
            handle = await startProcessor(l, noop, transactions);
            return handle;
          },
        ),
      );
      await handle?.processor.close();
      await reader.stop();
      await dropLayout(l);
    }

    // 5. commit cadence at 50 % of saturation.
    for (const interval of EXTRA_INTERVALS) {
      const l = await newLayout(`ci${interval}`);
      const reader = new ArrivalReader(kafka, l.results, `${l.groupId}-reader`);
      await reader.start();
      const { processor } = await startProcessor(l, runner, true, interval);
      while (!processor.readiness().ready) await sleep(50);
      latencies.push(
        await openLoop(
          "sluice, transactions on",
          l,
          reader,
          0.5,
          Math.max(1, Math.round(saturation * 0.5)),
          INTERVAL_SECONDS,
          interval,
        ),
      );
      await processor.close();
      await reader.stop();
      await dropLayout(l);
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    await runner.close();
    await broker.stop().catch(() => undefined);
  }

  const loadEnd = loadavg();
  const rawPerSec = raws.reduce((s, r) => s + r.perSec, 0) / Math.max(1, raws.length);
  const rawPerCpu = raws.reduce((s, r) => s + r.perCpuSec, 0) / Math.max(1, raws.length);
  const md = report({
    drains,
    latencies,
    raws,
    rawPerSec,
    rawPerCpu,
    rawBatch,
    saturation,
    brokerNote,
    loadStart,
    loadEnd,
    startedAt,
    finishedAt: new Date(),
    modelLabel: `${runner.identity.name}@${runner.identity.version}`,
    config,
  });
  process.stdout.write(`${md}\n`);
  await writeBenchmarkSection("pipeline", md);
}

function report(r: {
  drains: DrainRow[];
  latencies: LatencyRow[];
  raws: RawRun[];
  rawPerSec: number;
  rawPerCpu: number;
  rawBatch: number;
  saturation: number;
  brokerNote: string;
  loadStart: number[];
  loadEnd: number[];
  startedAt: Date;
  finishedAt: Date;
  modelLabel: string;
  config: ReturnType<typeof loadConfig>;
}): string {
  const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "-");
  const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : "-");
  const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "-");
  const la = (l: number[]) => l.map((x) => x.toFixed(1)).join(" / ");
  const txn = r.drains[0];
  const c = r.config;
  const minutes = (r.finishedAt.getTime() - r.startedAt.getTime()) / 60_000;
  const pct = (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)} %` : "-");
  const rows = r.drains.map((d) => {
    const isModel = !d.label.startsWith("no-op");
    const baseline = d.label.includes("baseline");
    return `| ${d.label} | ${d.received}/${d.records} | ${f1(d.perSec)} | ${isModel ? f1(d.sustainedPerSec) : "-"} | ${isModel ? f2(d.sustainedPerSec / r.rawPerSec) : "n/a"} | ${isModel ? f2(d.perCpuSec / r.rawPerCpu) : "-"} | ${txn && d !== txn && isModel ? f2(txn.sustainedPerSec / d.sustainedPerSec) : "-"} | ${f1(d.meanBatch)} | ${baseline ? "-" : f1(d.commitsPerSec)} | ${baseline ? "-" : f0(d.commitMedianMs)} | ${pct(d.machineBusy)} | ${f0(d.loopDelayP99Ms)} | ${d.notOk} |`;
  });
  const lat = r.latencies.map(
    (l) =>
      `| ${l.label} | ${l.commitIntervalMs} | ${Math.round(l.fraction * 100)} % | ${l.rate} | ${l.received}/${l.sent} | ${f0(l.p50)} | ${f0(l.p95)} | ${f0(l.p99)} | ${f0(l.p999)} | ${f0(l.max)} |`,
  );
  return `## Streaming pipeline (\`npm run bench:pipeline\`)

Model \`${r.modelLabel}\` (default, ${c.model.workers} worker(s) × ${c.model.intraOpThreads} intra-op thread(s)), texts from \`loadCorpus\`
(the same ${RECORDS} sentences for every model run). Broker: ${r.brokerNote}; ${PARTITIONS} input partitions.
Processor: in-process \`StreamProcessor\` with \`sluice serve\`'s defaults (maxBatchSize ${maxBatchSize(c.batching, c.model.task)},
maxWaitMs ${c.batching.maxWaitMs}, maxInFlightBatches ${c.batching.maxInFlightBatches}, maxQueuedRecords
${c.batching.maxQueuedRecords}, commitIntervalMs ${c.delivery.commitIntervalMs}, JSON codecs). The load generator, the
read_committed reader and the broker share the machine: ${machineDescription().replace(/, load average.*$/, "")}.
Load average ${la(r.loadStart)} at start, ${la(r.loadEnd)} at the end (1/5/15 min); on this shared 2-core machine
treat differences under ~20 % between runs as noise. ${r.startedAt.toISOString().slice(0, 16)}Z, ${f1(minutes)} min. One run.

### Sustained throughput (pre-produced backlog, drained)

*Whole drain* = results ÷ (last result seen by a read_committed reader − the moment the consumer owned its
partitions: group joined and, for Sluice, dedup state restored). *Sustained* = results per second between
the arrival of the 10 % and of the 90 % result (start-up ramp and the final commit excluded); the ratios
use it. Raw = \`TextModelRunner.run\`
closed loop over the same texts at batch ${r.rawBatch} (the mean batch the transactional run reached),
${c.batching.maxInFlightBatches} calls in flight: ${r.raws.map((x) => `${f1(x.perSec)} (machine CPU busy ${pct(x.machineBusy)})`).join(" and ")} items/s, mean ${f1(r.rawPerSec)}; measured after the
transactional drain and after the baseline. Per CPU-s = results per CPU-second of the benchmark process
(inference worker, processor, reader and load generator included; the broker is not), against raw per CPU-s
(${f1(r.rawPerCpu)}), which is steadier than wall time on a shared machine. *Machine CPU busy* = share of both cores busy
(all processes, /proc/stat) during the window: the broker and other users' work show up here.
*Event-loop p99* = main-thread event-loop delay during the drain (\`monitorEventLoopDelay\`). No-op rows:
the whole backlog arrives in a handful of large commits, so only the whole-drain rate means anything.

| Run | results | whole drain /s | sustained /s | ÷ raw | ÷ raw per CPU-s | txn on ÷ this | mean batch | commits/s | commit median ms | machine CPU busy | event-loop p99 ms | not ok |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${rows.join("\n")}

Goal (issue 4): transactions on ÷ raw ≥ 0.9. The per-message baseline is a kafkajs \`eachMessage\` consumer
(auto-commit) that runs the model on one record and awaits one produced result per message (same model, same
result encoding, no transactions, no dedup), ${BASELINE_RECORDS} records. The no-op model returns a 384-dim zero
embedding (same result size) with no inference: ${NOOP_RECORDS} records; its results/s is the Kafka ceiling of this
machine. "commits/s" = committed transactions (or at-least-once offset commits) per second over all partitions.
Where the gap to raw comes from: docs/processor.md, "Throughput against the raw model".

### End-to-end latency, open loop

Constant arrival rate (requests are due on a fixed schedule whether or not earlier ones finished), ${OPEN_SECONDS} s per
row (${INTERVAL_SECONDS} s for the commit-interval rows); saturation = the transactional whole-drain rate (${f1(r.saturation)}/s).
Latency = read_committed arrival − *scheduled* send time, in ms, recorded in an HDR histogram
(\`hdr-histogram-js\`, 3 significant digits). Measuring from the schedule rather than the actual send charges
every stall (of the sender, the broker or the processor) to all requests it delays, which is what corrects for
coordinated omission.

| Run | commitIntervalMs | load | rate/s | received | p50 | p95 | p99 | p99.9 | max |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${lat.join("\n")}

Reading: results become visible to read_committed readers only at commit, so \`commitIntervalMs\` adds up to one
interval (about half on average) to latency; 0 commits as soon as anything completed (at most one transaction in
flight per partition). Model rows are model-bound: compare them by ratio, not by absolute rate, across machines.
`;
}

await main();
