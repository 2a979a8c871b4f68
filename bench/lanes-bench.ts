/**
 * Lanes benchmark (issue 10): what a saturating backfill costs online requests in the same instance,
 * how much of the raw model the two lanes use together, and how many online requests fall back when
 * online load exceeds capacity. One run, the default model, real texts (`loadCorpus`), a real broker
 * (KAFKA_BROKERS, or the project's LocalBroker started here). Measures, never asserts.
 *
 *  0. Slice bound (no Kafka): a single online `TextModelRunner.run` issued while a backfill batch of
 *     2 × maxBatchSize rows runs waits for the ORT calls already running, not for the whole batch:
 *     its latency, against the same call on an idle model and the backfill batch's own duration.
 *  1. Raw model: `TextModelRunner.run` closed loop, maxBatchSize items per call, maxInFlightBatches calls.
 *  2. Backfill alone: a pre-produced backlog on the backfill topic drained by an in-process
 *     StreamProcessor (`sluice serve` defaults, `topics.backfill` set), rows/s between the 10 % and
 *     the 90 % result. This rate is the instance's saturation rate.
 *  3. Online alone at 50 % of saturation: open-loop constant-rate requests; latency = read_committed
 *     arrival − scheduled send time in an HDR histogram (coordinated omission avoided by construction).
 *  4. The same online load with a saturating backfill in the same instance (a backlog big enough to
 *     outlast the window): online latency again, plus online + backfill items/s during the window.
 *  5. Overload: online at BENCH_LANES_OVERLOAD × saturation with fallback rules; the share of results
 *     with status fallback, by reason. Fallback rules need a classification model, so this run wraps
 *     the default model as a two-label classifier (same ORT work; label from the embedding's sign).
 *
 *   npm run bench:lanes
 *   env: KAFKA_BROKERS; BENCH_LANES_SECONDS (20, each open-loop window); BENCH_LANES_ROWS (3000,
 *        backfill-alone backlog); BENCH_LANES_RAW_ITEMS (1000); BENCH_LANES_PROBES (40, slice probes);
 *        BENCH_LANES_OVERLOAD (1.5); BENCH_LANES_OUTPUT (BENCHMARKS.md; "-" prints the section only)
 *   smoke: BENCH_LANES_SECONDS=3 BENCH_LANES_ROWS=200 BENCH_LANES_RAW_ITEMS=100 BENCH_LANES_PROBES=5 \
 *          BENCH_LANES_OUTPUT=- npm run bench:lanes
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { createStreamProcessor } from "../src/app/stream-processor-factory.js";
import { loadConfig, maxBatchSize } from "../src/config/index.js";
import { RUN_ID_HEADER } from "../src/contracts/lane.js";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { SluiceEvents } from "../src/events/sluice-events.js";
import { ensureTopics } from "../src/kafka/client/topic-admin.js";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { RunManifestStore } from "../src/kafka/runs/run-manifest-store.js";
import type { ItemOutcome, ModelPort, ModelRunOptions } from "../src/model/model-port.js";
import { modelRunnerOptionsFromConfig } from "../src/model/model-runner-config.js";
import { TextModelRunner } from "../src/model/text-model-runner.js";
import { resolveWorkerCount } from "../src/model/worker-count.js";
import { processorOptionsFromConfig } from "../src/processor/stream-processor-options.js";
import { ArrivalReader } from "./arrival-reader.js";
import { benchBroker } from "./bench-broker.js";
import { loadCorpus } from "./corpus.js";
import { type OpenLoopLatency, runOpenLoop } from "./open-loop.js";
import { machineDescription, percentile, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const SECONDS = num("BENCH_LANES_SECONDS", 20);
const ROWS = num("BENCH_LANES_ROWS", 3000);
const RAW_ITEMS = num("BENCH_LANES_RAW_ITEMS", 1000);
const PROBES = num("BENCH_LANES_PROBES", 40);
const OVERLOAD = num("BENCH_LANES_OVERLOAD", 1.5);
const OUTPUT = process.env.BENCH_LANES_OUTPUT ?? "";
const PARTITIONS = 3;

const now = () => performance.now();
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const runTag = Date.now().toString(36);
let seq = 0;

type Latency = OpenLoopLatency;

/** The default model's work, answered as a two-label classifier (fallback rules need one). */
class ClassifyingEmbedder implements ModelPort {
  readonly task = "classification" as const;
  constructor(private readonly inner: ModelPort) {}
  get identity() {
    return this.inner.identity;
  }
  countTokens(text: string): number {
    return this.inner.countTokens(text);
  }
  async run(texts: readonly unknown[], options?: ModelRunOptions) {
    const run = await this.inner.run(texts, options);
    const outcomes = run.outcomes.map((o): ItemOutcome => {
      if (!o.ok) return o;
      const first = o.output.embedding?.[0] ?? 0;
      const label = first >= 0 ? "plus" : "minus";
      return { ...o, output: { label, scores: { plus: first >= 0 ? 1 : 0, minus: first >= 0 ? 0 : 1 } } };
    });
    return { outcomes, stats: run.stats };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const broker = await benchBroker();
  const { brokers } = broker;
  const brokerNote = broker.note;
  const kafka = new Kafka({ clientId: "lanes-bench", brokers, logLevel: logLevel.NOTHING });
  fixAbortedTransactionOrder();
  const config = loadConfig();
  const modelOptions = await modelRunnerOptionsFromConfig(config, (l) =>
    process.stderr.write(`[model] ${l}\n`),
  );
  const runner = await TextModelRunner.create(modelOptions);
  const texts = loadCorpus(Math.max(ROWS, RAW_ITEMS, 1000));
  const text = (i: number) => texts[i % texts.length] as string;
  const batchSize = maxBatchSize(config.batching, config.model.task);
  const inFlight = config.batching.maxInFlightBatches;
  const producer = kafka.producer();
  await producer.connect();

  // ── 0. slice bound ──────────────────────────────────────────────────────────────────────────────
  const idle: number[] = [];
  for (let i = 0; i < PROBES; i++) {
    const t = now();
    await runner.run([text(i)]);
    idle.push(now() - t);
  }
  idle.sort((a, b) => a - b);
  const during: number[] = [];
  for (let i = 0; i < PROBES; i++) {
    const backfill = runner.run(
      Array.from({ length: batchSize * 2 }, (_, j) => text(100 + i * 7 + j)),
      { lane: "backfill" },
    );
    await sleep(5 + ((i * 13) % 20)); // land somewhere inside the backfill batch
    const t = now();
    await runner.run([text(i)]);
    during.push(now() - t);
    await backfill;
  }
  during.sort((a, b) => a - b);
  const slice = {
    idleP50: percentile(idle, 50),
    duringP50: percentile(during, 50),
    duringP99: percentile(during, 99),
    duringMax: during[during.length - 1] ?? Number.NaN,
    backfillBatchMs: Number.NaN,
  };
  {
    const t = now();
    await runner.run(
      Array.from({ length: batchSize * 2 }, (_, j) => text(j)),
      { lane: "backfill" },
    );
    slice.backfillBatchMs = now() - t;
  }
  log(`slice bound: ${JSON.stringify(slice)}`);

  // ── 1. raw model ────────────────────────────────────────────────────────────────────────────────
  const raw = async () => {
    const items = Array.from({ length: RAW_ITEMS }, (_, i) => text(i));
    let next = 0;
    const t0 = now();
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (next < items.length) {
          const batch = items.slice(next, next + batchSize);
          next += batchSize;
          await runner.run(batch);
        }
      }),
    );
    return (items.length / (now() - t0)) * 1000;
  };
  const rawPerSec = await raw();
  log(`raw model: ${rawPerSec.toFixed(1)} items/s`);

  // ── helpers: topics, processor, load ────────────────────────────────────────────────────────────
  const layout = async () => {
    const base = `bench-lanes-${runTag}-${seq++}`;
    const l = {
      online: `${base}.requests`,
      backfill: `${base}.backfill`,
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      runs: `${base}.runs`,
      groupId: `${base}-group`,
    };
    // Backfill transactions carry the run's cost share to the runs topic (docs/observability.md).
    await new RunManifestStore({ kafka, topic: l.runs, replicationFactor: 1 }).ensureTopic();
    await ensureTopics(kafka, {
      requests: [l.online, l.backfill],
      results: l.results,
      deadLetters: l.deadLetters,
      dedupChangelog: l.dedupChangelog,
      groupId: l.groupId,
      partitions: PARTITIONS,
      replicationFactor: 1,
    });
    const reader = new ArrivalReader(kafka, l.results, `${base}-reader`);
    await reader.start();
    return { ...l, reader };
  };
  type Layout = Awaited<ReturnType<typeof layout>>;
  const preProduce = async (topic: string, prefix: string, n: number) => {
    for (let i = 0; i < n; i += 1000) {
      const k = Math.min(1000, n - i);
      await producer.send({
        topic,
        messages: Array.from({ length: k }, (_, j) => {
          const id = `${prefix}${i + j}`;
          const enc = encodeRequest({ id, text: text(i + j) }, "json");
          return { key: id, value: enc.value, headers: { ...enc.headers, [RUN_ID_HEADER]: "bench" } };
        }),
      });
    }
  };
  const start = async (l: Layout, model: ModelPort, extraOptions: Record<string, unknown> = {}) => {
    const events = new SluiceEvents();
    const fallbacks = new Map<string, number>();
    events.on("record.outcome", (e) => {
      if (e.fallbackReason) fallbacks.set(e.fallbackReason, (fallbacks.get(e.fallbackReason) ?? 0) + 1);
    });
    const processor = createStreamProcessor({
      ...processorOptionsFromConfig(config, { kafka, model, events }),
      groupId: l.groupId,
      requestTopics: [l.online],
      backfillTopics: [l.backfill],
      resultsTopic: l.results,
      deadLetterTopic: l.deadLetters,
      dedupChangelogBase: l.dedupChangelog,
      runsTopic: l.runs,
      ...extraOptions,
    });
    await processor.start();
    while (!processor.readiness().ready) await sleep(5);
    return { processor, fallbacks };
  };
  const openLoop = (l: Layout, rate: number, seconds: number): Promise<Latency> =>
    runOpenLoop({
      producer,
      topic: l.online,
      reader: l.reader,
      prefix: `o${seq++}-`,
      rate,
      seconds,
      text,
      waitMs: 120_000,
    });
  const stop = async (l: Layout, p: { processor: { close(): Promise<void> } }) => {
    await p.processor.close();
    await l.reader.stop();
  };

  // ── 2. backfill alone ──────────────────────────────────────────────────────────────────────────
  let saturation: number;
  {
    const l = await layout();
    await preProduce(l.backfill, "b-", ROWS);
    const p = await start(l, runner);
    await l.reader.waitFor("b-", ROWS, 600_000);
    const times = l.reader.times("b-");
    const a = times[Math.floor(times.length * 0.1)] as number;
    const b = times[Math.floor(times.length * 0.9)] as number;
    saturation = ((Math.floor(times.length * 0.9) - Math.floor(times.length * 0.1)) / (b - a)) * 1000;
    await stop(l, p);
    log(`backfill alone: ${saturation.toFixed(1)} rows/s`);
  }
  const halfRate = saturation / 2;

  // ── 3. online alone at 50 % ────────────────────────────────────────────────────────────────────
  let alone: Latency;
  {
    const l = await layout();
    const p = await start(l, runner);
    alone = await openLoop(l, halfRate, SECONDS);
    await stop(l, p);
    log(`online alone: ${JSON.stringify(alone)}`);
  }

  // ── 4. online at 50 % with a saturating backfill ───────────────────────────────────────────────
  let mixed: Latency;
  let mixedPerSec: number;
  let backfillShare: number;
  {
    const l = await layout();
    const rows = Math.ceil(saturation * (SECONDS + 10) * 1.2);
    await preProduce(l.backfill, "m-", rows);
    const p = await start(l, runner);
    await l.reader.waitFor("m-", Math.min(rows, Math.ceil(saturation)), 120_000); // backfill flowing
    const t0 = now();
    mixed = await openLoop(l, halfRate, SECONDS);
    const window = { from: t0, to: now() };
    let items = 0;
    let backfillItems = 0;
    for (const [k, t] of l.reader.arrivals) {
      if (t < window.from || t > window.to) continue;
      items++;
      if (k.startsWith("m-")) backfillItems++;
    }
    mixedPerSec = (items / (window.to - window.from)) * 1000;
    backfillShare = items > 0 ? backfillItems / items : Number.NaN;
    const left = rows - l.reader.count("m-");
    await stop(l, p);
    log(
      `online + backfill: ${JSON.stringify(mixed)}, ${mixedPerSec.toFixed(1)} items/s, ${left} backfill rows left`,
    );
  }

  // ── 5. overload with fallback rules ────────────────────────────────────────────────────────────
  let overload: { sent: number; fallback: number; reasons: Record<string, number> };
  {
    const dir = mkdtempSync(join(tmpdir(), "lanes-bench-"));
    const rulesPath = join(dir, "rules.yaml");
    writeFileSync(rulesPath, "rules: []\ndefault:\n  label: plus\n  scores: { plus: 0.5, minus: 0.5 }\n");
    const l = await layout();
    const p = await start(l, new ClassifyingEmbedder(runner), {
      fallbackRulesPath: rulesPath,
      defaultTimeoutMs: 2000,
    });
    const row = await openLoop(l, saturation * OVERLOAD, SECONDS);
    const fallback = [...p.fallbacks.values()].reduce((a, b) => a + b, 0);
    overload = { sent: row.sent, fallback, reasons: Object.fromEntries(p.fallbacks) };
    await stop(l, p);
    rmSync(dir, { recursive: true, force: true });
    log(`overload: ${JSON.stringify(overload)}`);
  }

  await producer.disconnect();
  await runner.close();
  await broker.stop();

  const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "n/a");
  const ms = (n: number) => `${f(n, 0)} ms`;
  const section = `## Lanes (\`npm run bench:lanes\`)

Run ${startedAt.toISOString()}; ${machineDescription()}; broker: ${brokerNote}; model ${runner.identity.name}
(${runner.description.isolateItems ? "isolated items" : "batched"}, workers ${resolveWorkerCount(modelOptions.workers ?? "auto")}), maxBatchSize ${batchSize},
maxInFlightBatches ${inFlight}; windows of ${SECONDS} s, ${PARTITIONS} partitions per topic.

| measurement | value |
| --- | --- |
| slice bound: one online call on an idle model, p50 | ${ms(slice.idleP50)} |
| slice bound: the same call issued during a ${batchSize * 2}-row backfill batch (which takes ${ms(slice.backfillBatchMs)}), p50 / p99 / max | ${ms(slice.duringP50)} / ${ms(slice.duringP99)} / ${ms(slice.duringMax)} |
| raw model (closed loop) | ${f(rawPerSec)} items/s |
| backfill alone (saturation) | ${f(saturation)} rows/s (${f(saturation / rawPerSec, 2)} × raw) |
| online alone at 50 % (${f(halfRate)}/s): p50 / p95 / p99 | ${ms(alone.p50)} / ${ms(alone.p95)} / ${ms(alone.p99)} (${alone.received}/${alone.sent}) |
| online at 50 % + saturating backfill: p50 / p95 / p99 | ${ms(mixed.p50)} / ${ms(mixed.p95)} / ${ms(mixed.p99)} (${mixed.received}/${mixed.sent}) |
| p99 ratio (with backfill ÷ alone; goal ≤ 1.5) | ${f(mixed.p99 / alone.p99, 2)} |
| online + backfill together | ${f(mixedPerSec)} items/s = ${f(mixedPerSec / rawPerSec, 2)} × raw (goal ≥ 0.9); backfill ${f(backfillShare * 100, 0)} % of them |
| overload at ${f(OVERLOAD, 2)} × saturation: fallback share | ${f((overload.fallback / overload.sent) * 100, 1)} % of ${overload.sent} (${
    Object.entries(overload.reasons)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ") || "none"
  }) |

The overload row wraps the default model as a two-label classifier (same ORT work), since fallback rules
answer classification models only; \`defaultTimeoutMs\` 2000 and \`fallback.maxOnlineQueue\` ${config.fallback.maxOnlineQueue}.
`;
  if (OUTPUT === "-") process.stdout.write(`${section}\n`);
  else await writeBenchmarkSection("lanes", section, OUTPUT || undefined);
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
