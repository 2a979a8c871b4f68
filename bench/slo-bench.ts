/**
 * SLO benchmark (issue 19): the online tail beside a backfill, measured the way users run Sluice.
 * `sluice serve` runs as separate processes (`node bin/sluice.js serve`, 1 and 2 instances on this
 * machine, the default model, `model.workers: auto`); requests are paragraphs of realistic length
 * (`loadParagraphs`: ~10–256 tokens); backfills go in with `sluice backfill submit`; results are read
 * by a `read_committed` reader. Measures, never asserts.
 *
 * The latency clock starts at the broker: the requests topic uses LogAppendTime, so a result's
 * `timing.requestTimestamp` is the broker's append time, and latency = the reader's arrival time −
 * that. On a saturated shared machine the load generator stalls too; counted from its scheduled send
 * time the same runs read far worse (docs/design.md §3, "Where a latency clock starts").
 *
 * Per variant (below), instance count and repeat:
 *  1. online alone at each rate for BENCH_SLO_ALONE_SECONDS: p50/p99;
 *  2. a backfill alone of BENCH_SLO_ROWS rows: its rate between the 10 % and the 90 % result;
 *  3. per rate, online at that rate beside a backfill of BENCH_SLO_ROWS rows submitted 2 s in: the
 *     online p99 of requests appended while the backfill ran, and the backfill's rate.
 * Every online id and every backfill id must arrive exactly once (counted at the reader).
 *
 *   npm run bench:slo
 *   env: KAFKA_BROKERS; BENCH_SLO_INSTANCES ("1,2"); BENCH_SLO_RATES ("5,10", requests/s);
 *        BENCH_SLO_REPEATS (5); BENCH_SLO_ALONE_SECONDS (30); BENCH_SLO_ROWS (1500);
 *        BENCH_SLO_VARIANTS ("nice"; the first gets BENCH_SLO_REPEATS, the others
 *        BENCH_SLO_REPEATS_OTHER (2), side by side in the same run): nice = the defaults (guard on,
 *        backfill workers at nice 10), shared = guard on, model.backfillWorkers 0 (backfill calls
 *        share the online workers), off = lanes.guard false and shared workers;
 *        BENCH_SLO_OUTPUT (BENCHMARKS.md; "-" prints)
 *   smoke: BENCH_SLO_INSTANCES=1 BENCH_SLO_RATES=5 BENCH_SLO_REPEATS=1 BENCH_SLO_ALONE_SECONDS=4 \
 *          BENCH_SLO_ROWS=60 BENCH_SLO_OUTPUT=- npm run bench:slo
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Kafka, logLevel, type Producer } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { benchBroker } from "./bench-broker.js";
import { loadParagraphs } from "./corpus.js";
import { machineDescription, percentile, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const INSTANCES = list("BENCH_SLO_INSTANCES", "1,2").map(Number);
const RATES = list("BENCH_SLO_RATES", "5,10").map(Number);
const REPEATS = num("BENCH_SLO_REPEATS", 5);
/** Repeats of the comparison variants (all but the first). */
const REPEATS_OTHER = num("BENCH_SLO_REPEATS_OTHER", 2);
const ALONE_SECONDS = num("BENCH_SLO_ALONE_SECONDS", 30);
const ROWS = num("BENCH_SLO_ROWS", 1500);
/** What each variant sets on the served instances. */
const VARIANT_SETTINGS: Record<string, { guard: boolean; backfillWorkers: string; label: string }> = {
  nice: { guard: true, backfillWorkers: "auto", label: "defaults: guard on, backfill workers at nice 10" },
  shared: {
    guard: true,
    backfillWorkers: "0",
    label: "guard on, `model.backfillWorkers: 0` (shared workers)",
  },
  off: { guard: false, backfillWorkers: "0", label: "`lanes.guard: false`, shared workers" },
};
const VARIANTS = list("BENCH_SLO_VARIANTS", "nice");
for (const v of VARIANTS)
  if (!(v in VARIANT_SETTINGS))
    throw new Error(`BENCH_SLO_VARIANTS: unknown ${v}; use ${Object.keys(VARIANT_SETTINGS).join(", ")}`);
const OUTPUT = process.env.BENCH_SLO_OUTPUT ?? "";
const PARTITIONS = 4;

/** The repository root, from bench/ (tsx) or dist/bench/ (built). */
const ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      if (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).name === "sluice") return dir;
    } catch {
      // not here
    }
    dir = dirname(dir);
  }
  return process.cwd();
})();
const SLUICE = join(ROOT, "bin", "sluice.js");
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const runTag = Date.now().toString(36);

/** One result as the reader saw it: arrival (epoch ms), broker append time, the result's own timing. */
interface Arrival {
  arrivedMs: number;
  appendedMs: number;
  count: number;
  /** completedAt − requestTimestamp − queueMs − inferenceMs: fetch, decode, dedup until enqueue. */
  intakeMs: number;
  queueMs: number;
  inferenceMs: number;
  /** arrival − completedAt: waiting for the transaction, the commit, the reader's fetch. */
  commitMs: number;
}

/**
 * Results as read_committed readers see them: arrival (epoch ms), broker append time, count. One
 * consumer per topic, as users read them: an online subscriber reads the results topic only, so its
 * fetches never wait behind backfill results (~1 MB/s of embeddings beside a backfill). Backfill
 * results are only counted (their id is the key), not parsed.
 */
class ResultReader {
  readonly seen = new Map<string, Arrival>();
  private readonly consumers;
  constructor(
    kafka: Kafka,
    private readonly topics: { topic: string; timing: boolean }[],
  ) {
    this.consumers = topics.map(() =>
      kafka.consumer({
        groupId: `slo-reader-${runTag}-${Math.random().toString(36).slice(2, 8)}`,
        readUncommitted: false,
        maxWaitTimeInMs: 20,
      }),
    );
  }
  async start(): Promise<void> {
    for (const [i, consumer] of this.consumers.entries()) {
      const { topic, timing } = this.topics[i] as { topic: string; timing: boolean };
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          const at = Date.now();
          for (const m of batch.messages) {
            const id = m.key?.toString();
            if (!id || !m.value) continue;
            const prior = this.seen.get(id);
            if (prior) {
              prior.count++;
              continue;
            }
            this.seen.set(id, timing ? arrival(at, m.value) : { ...NO_TIMING, arrivedMs: at });
          }
        },
      });
    }
  }
  count(prefix: string): number {
    let n = 0;
    for (const k of this.seen.keys()) if (k.startsWith(prefix)) n++;
    return n;
  }
  async waitFor(prefix: string, n: number, timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    while (this.count(prefix) < n) {
      if (Date.now() > until) return false;
      await sleep(50);
    }
    return true;
  }
  entries(prefix: string) {
    return [...this.seen].filter(([k]) => k.startsWith(prefix)).map(([, v]) => v);
  }
  async stop(): Promise<void> {
    await Promise.all(this.consumers.map((c) => c.disconnect()));
  }
}

const NO_TIMING: Arrival = {
  arrivedMs: 0,
  appendedMs: Number.NaN,
  count: 1,
  intakeMs: Number.NaN,
  queueMs: Number.NaN,
  inferenceMs: Number.NaN,
  commitMs: Number.NaN,
};

/** An online result's arrival with the parts of its latency, from the result's own `timing`. */
function arrival(at: number, value: Buffer): Arrival {
  let t: { requestTimestamp?: number; queueMs?: number; inferenceMs?: number; completedAt?: number } = {};
  try {
    t = JSON.parse(value.toString()).timing ?? {};
  } catch {
    // not a JSON result
  }
  const appendedMs = Number(t.requestTimestamp);
  const queueMs = Number(t.queueMs);
  const inferenceMs = Number(t.inferenceMs);
  const completedAt = Number(t.completedAt);
  return {
    arrivedMs: at,
    appendedMs,
    count: 1,
    intakeMs: completedAt - appendedMs - queueMs - inferenceMs,
    queueMs,
    inferenceMs,
    commitMs: at - completedAt,
  };
}

/** Open-loop constant-rate sends of paragraphs until `stop()` says so or `maxSeconds` pass. */
async function sendOpenLoop(o: {
  producer: Producer;
  topic: string;
  rate: number;
  prefix: string;
  texts: string[];
  maxSeconds: number;
  stop?: () => boolean;
}): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  const sends: Promise<unknown>[] = [];
  while ((performance.now() - t0) / 1000 < o.maxSeconds && !(o.stop?.() ?? false)) {
    const due: { key: string; value: Buffer; headers: Record<string, string> }[] = [];
    const elapsed = performance.now() - t0;
    while ((next * 1000) / o.rate <= elapsed) {
      const id = `${o.prefix}${next}`;
      due.push({ key: id, ...encodeRequest({ id, text: o.texts[next % o.texts.length] as string }, "json") });
      next++;
    }
    if (due.length > 0) sends.push(o.producer.send({ topic: o.topic, messages: due }));
    await sleep(Math.max(1, (next * 1000) / o.rate - (performance.now() - t0)));
  }
  await Promise.all(sends);
  return next;
}

function p99(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return percentile(sorted, 99);
}
function p50(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return percentile(sorted, 50);
}
const median = (xs: number[]) => p50(xs);

/** Rows per second between the 10 % and the 90 % arrival. */
function rate(arrivals: number[]): number {
  const sorted = [...arrivals].sort((a, b) => a - b);
  if (sorted.length < 10) return Number.NaN;
  const lo = sorted[Math.floor(sorted.length * 0.1)] as number;
  const hi = sorted[Math.floor(sorted.length * 0.9)] as number;
  return hi > lo
    ? ((Math.floor(sorted.length * 0.9) - Math.floor(sorted.length * 0.1)) * 1000) / (hi - lo)
    : Number.NaN;
}

interface Serving {
  procs: ChildProcess[];
  logs: string[];
  ports: number[];
}

async function startServing(configPath: string, n: number, guard: boolean, dir: string): Promise<Serving> {
  const procs: ChildProcess[] = [];
  const logs: string[] = [];
  const ports: number[] = [];
  for (let i = 0; i < n; i++) {
    const port = 19_600 + Math.floor(Math.random() * 300) + i * 317;
    const logPath = join(dir, `serve-${i}.log`);
    const out = createWriteStream(logPath);
    const child = spawn(process.execPath, [SLUICE, "--config", configPath, "serve"], {
      cwd: ROOT,
      env: {
        ...process.env,
        SLUICE_OBSERVABILITY__METRICS_PORT: String(port),
        SLUICE_OBSERVABILITY__INSTANCE_ID: `slo-${i}`,
        SLUICE_LANES__GUARD: guard ? "true" : "false",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout?.pipe(out);
    child.stderr?.pipe(out);
    procs.push(child);
    logs.push(logPath);
    ports.push(port);
  }
  const until = Date.now() + 180_000;
  for (const port of ports) {
    for (;;) {
      if (Date.now() > until)
        throw new Error(`serve on port ${port} not ready in 180 s (logs: ${logs.join(", ")})`);
      try {
        const r = await fetch(`http://127.0.0.1:${port}/readyz`);
        if (r.ok) break;
      } catch {
        // not listening yet
      }
      await sleep(500);
    }
  }
  return { procs, logs, ports };
}

async function stopServing(s: Serving): Promise<void> {
  await Promise.all(
    s.procs.map(
      (p) =>
        new Promise<void>((done) => {
          if (p.exitCode !== null) return done();
          p.once("exit", () => done());
          p.kill("SIGTERM");
          setTimeout(() => p.kill("SIGKILL"), 30_000).unref();
        }),
    ),
  );
}

function submit(configPath: string, file: string, runId: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [SLUICE, "--config", configPath, "backfill", "submit", "--input", file, "--run-id", runId],
      { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] },
    );
    let err = "";
    child.stderr?.on("data", (d) => {
      err += d;
    });
    child.once("exit", (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`backfill submit ${runId} exited ${code}: ${err.slice(-500)}`)),
    );
  });
}

interface RunRow {
  variant: string;
  instances: number;
  rate: number;
  repeat: number;
  aloneP50: number;
  aloneP99: number;
  besideP50: number;
  besideP99: number;
  backfillAlone: number;
  backfillBeside: number;
  lost: number;
  doubled: number;
  /** p99 of each part of the beside latency (intake, queue, inference, commit), ms. */
  besideParts: string;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const broker = await benchBroker();
  const kafka = new Kafka({ clientId: "slo-bench", brokers: broker.brokers, logLevel: logLevel.NOTHING });
  fixAbortedTransactionOrder();
  const onlineTexts = loadParagraphs(2000, 1);
  const backfillTexts = loadParagraphs(ROWS * 2, 2);
  const dir = mkdtempSync(join(tmpdir(), "sluice-slo-"));
  const producer = kafka.producer();
  await producer.connect();
  const admin = kafka.admin();
  await admin.connect();
  const rows: RunRow[] = [];
  const guardLines: Record<string, { engaged: number; released: number }> = {};
  try {
    for (const [variantIndex, mode] of VARIANTS.entries()) {
      const variant = VARIANT_SETTINGS[mode] as (typeof VARIANT_SETTINGS)[string];
      for (const n of INSTANCES) {
        const base = `slo-${runTag}-${mode}-${n}`;
        const requests = `${base}.requests`;
        const results = `${base}.results`;
        const backfillResults = `${base}.bresults`;
        await admin.createTopics({
          waitForLeaders: true,
          topics: [
            {
              topic: requests,
              numPartitions: PARTITIONS,
              configEntries: [{ name: "message.timestamp.type", value: "LogAppendTime" }],
            },
            { topic: `${base}.backfill`, numPartitions: PARTITIONS },
          ],
        });
        const configPath = join(dir, `${base}.yaml`);
        writeFileSync(
          configPath,
          [
            "kafka:",
            `  brokers: [${broker.brokers.map((b) => JSON.stringify(b)).join(", ")}]`,
            "topics:",
            `  requests: [${requests}]`,
            `  backfill: [${base}.backfill]`,
            `  results: ${results}`,
            `  backfillResults: ${backfillResults}`,
            `  deadLetters: ${base}.dlq`,
            `  dedupChangelog: ${base}.dedup`,
            `  runs: ${base}.runs`,
            "consumer:",
            `  groupId: ${base}`,
            "model:",
            `  backfillWorkers: ${variant.backfillWorkers}`,
            "",
          ].join("\n"),
        );
        log(`${mode} (${variant.label}), ${n} instance(s): starting sluice serve`);
        const serving = await startServing(configPath, n, variant.guard, dir);
        const reader = new ResultReader(kafka, [
          { topic: results, timing: true },
          { topic: backfillResults, timing: false },
        ]);
        await reader.start();
        try {
          // Warm-up: the model, the producers' transactions and the reader's fetch loop.
          await sendOpenLoop({
            producer,
            topic: requests,
            rate: 5,
            prefix: "warm-",
            texts: onlineTexts,
            maxSeconds: 3,
          });
          log(
            `warm-up: ${(await reader.waitFor("warm-", 15, 60_000)) ? "results arrive" : "NO results in 60 s"}`,
          );
          for (let r = 0; r < (variantIndex === 0 ? REPEATS : REPEATS_OTHER); r++) {
            const alone = new Map<number, number[]>();
            for (const rt of RATES) {
              const prefix = `a${r}r${rt}-`;
              const sent = await sendOpenLoop({
                producer,
                topic: requests,
                rate: rt,
                prefix,
                texts: onlineTexts,
                maxSeconds: ALONE_SECONDS,
              });
              await reader.waitFor(prefix, sent, 60_000);
              alone.set(
                rt,
                reader.entries(prefix).map((e) => e.arrivedMs - e.appendedMs),
              );
            }
            const aloneRun = `alone-${r}`;
            const aloneFile = join(dir, `${base}-${aloneRun}.jsonl`);
            writeFileSync(
              aloneFile,
              backfillTexts
                .slice(0, ROWS)
                .map((text, i) => JSON.stringify({ id: `${aloneRun}-${i}`, text }))
                .join("\n"),
            );
            await submit(configPath, aloneFile, aloneRun);
            log(`#${r + 1}: online alone measured; backfill ${aloneRun} submitted`);
            await reader.waitFor(`${aloneRun}-`, ROWS, 600_000);
            const backfillAlone = rate(reader.entries(`${aloneRun}-`).map((e) => e.arrivedMs));
            for (const rt of RATES) {
              const run = `beside-${r}-${rt}`;
              const file = join(dir, `${base}-${run}.jsonl`);
              writeFileSync(
                file,
                backfillTexts
                  .slice(ROWS, 2 * ROWS)
                  .map((text, i) => JSON.stringify({ id: `${run}-${i}`, text }))
                  .join("\n"),
              );
              const prefix = `s${r}r${rt}-`;
              let backfillDone = false;
              const online = sendOpenLoop({
                producer,
                topic: requests,
                rate: rt,
                prefix,
                texts: onlineTexts,
                maxSeconds: 900,
                stop: () => backfillDone,
              });
              await sleep(2000);
              await submit(configPath, file, run);
              await reader.waitFor(`${run}-`, ROWS, 900_000);
              backfillDone = true;
              const sent = await online;
              await reader.waitFor(prefix, sent, 60_000);
              const bf = reader
                .entries(`${run}-`)
                .map((e) => e.arrivedMs)
                .sort((a, b) => a - b);
              const from = bf[0] ?? 0;
              const to = bf[bf.length - 1] ?? 0;
              const besideEntries = reader
                .entries(prefix)
                .filter((e) => e.appendedMs >= from && e.appendedMs <= to);
              const beside = besideEntries.map((e) => e.arrivedMs - e.appendedMs);
              const part = (k: "intakeMs" | "queueMs" | "inferenceMs" | "commitMs") =>
                p99(besideEntries.map((e) => e[k])).toFixed(0);
              const besideParts = `${part("intakeMs")} / ${part("queueMs")} / ${part("inferenceMs")} / ${part("commitMs")}`;
              const prefixes = [prefix, `${run}-`, `a${r}r${rt}-`];
              const expected = [sent, ROWS, reader.count(`a${r}r${rt}-`)];
              let lost = 0;
              let doubled = 0;
              prefixes.forEach((p, i) => {
                const entries = reader.entries(p);
                lost += Math.max(0, (expected[i] as number) - entries.length);
                doubled += entries.filter((e) => e.count > 1).length;
              });
              const aloneLat = alone.get(rt) ?? [];
              const row: RunRow = {
                variant: mode,
                instances: n,
                rate: rt,
                repeat: r + 1,
                aloneP50: p50(aloneLat),
                aloneP99: p99(aloneLat),
                besideP50: p50(beside),
                besideP99: p99(beside),
                backfillAlone,
                backfillBeside: rate(bf),
                lost,
                doubled,
                besideParts,
              };
              rows.push(row);
              log(
                `${mode} n=${n} rate=${rt} #${r + 1}: online p99 alone ${row.aloneP99.toFixed(0)} ms, beside ${row.besideP99.toFixed(0)} ms (×${(row.besideP99 / row.aloneP99).toFixed(2)}); backfill ${row.backfillBeside.toFixed(1)}/${row.backfillAlone.toFixed(1)} rows/s; lost ${lost}, doubled ${doubled}; beside p99 intake/queue/inference/commit ${besideParts} ms`,
              );
            }
          }
        } finally {
          await reader.stop().catch(() => undefined);
          await stopServing(serving);
        }
        const text = serving.logs.map((l) => readFileSync(l, "utf8")).join("\n");
        guardLines[`${mode}-${n}`] = {
          engaged: (text.match(/backfill guard engaged/g) ?? []).length,
          released: (text.match(/backfill guard released/g) ?? []).length,
        };
      }
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const markdown = report(rows, guardLines, startedAt, broker.note, onlineTexts);
  if (OUTPUT === "-") process.stdout.write(`${markdown}\n`);
  else await writeBenchmarkSection("slo", markdown, OUTPUT || undefined);
}

function report(
  rows: RunRow[],
  guardLines: Record<string, { engaged: number; released: number }>,
  startedAt: Date,
  brokerNote: string,
  texts: string[],
): string {
  const words = texts.map((t) => t.split(/\s+/).length).sort((a, b) => a - b);
  const goal = (r: RunRow) => r.besideP99 <= 1.5 * r.aloneP99 + 25;
  const lines: string[] = [
    "## SLO guard: online tail beside a backfill (`npm run bench:slo`)",
    "",
    `Run ${startedAt.toISOString()} on ${machineDescription()}; broker: ${brokerNote}.`,
    `\`sluice serve\` as separate processes (\`node bin/sluice.js serve\`, default model, \`model.workers: auto\`), ${PARTITIONS} partitions per lane; online open-loop paragraphs (words per text p50 ${percentile(words, 50)}, p90 ${percentile(words, 90)}, p99 ${percentile(words, 99)}) for ${ALONE_SECONDS} s alone per rate; backfills of ${ROWS} paragraphs by \`sluice backfill submit\`; latency = read_committed arrival − broker append time (LogAppendTime on the requests topic).`,
    `Variants, side by side in this run: ${VARIANTS.map((v, i) => `**${v}** = ${VARIANT_SETTINGS[v]?.label} (${i === 0 ? REPEATS : REPEATS_OTHER} repeats)`).join("; ")}.`,
    "Goal per run: online p99 beside ≤ 1.5 × online p99 alone + 25 ms, backfill beside ≥ 0.5 × alone, nothing lost or doubled.",
    "",
    "| variant | instances | online req/s | runs: p99 beside ÷ alone | median | worst | worst run: p99 alone → beside | p99 goal met (runs) | backfill beside ÷ alone: median, worst | lost / doubled |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  const keys = [...new Set(rows.map((r) => `${r.variant}|${r.instances}|${r.rate}`))];
  for (const key of keys) {
    const group = rows.filter((r) => `${r.variant}|${r.instances}|${r.rate}` === key);
    const first = group[0] as RunRow;
    const ratios = group.map((r) => r.besideP99 / r.aloneP99);
    const worst = group.reduce((a, b) =>
      b.besideP99 - 1.5 * b.aloneP99 > a.besideP99 - 1.5 * a.aloneP99 ? b : a,
    );
    const bfRatios = group.map((r) => r.backfillBeside / r.backfillAlone);
    lines.push(
      `| ${first.variant} | ${first.instances} | ${first.rate} | ${ratios.map((x) => `×${x.toFixed(2)}`).join(", ")} | ×${median(ratios).toFixed(2)} | ×${Math.max(...ratios).toFixed(2)} | ${worst.aloneP99.toFixed(0)} → ${worst.besideP99.toFixed(0)} ms | ${group.filter(goal).length}/${group.length} | ${median(bfRatios).toFixed(2)}, ${Math.min(...bfRatios).toFixed(2)} | ${group.reduce((s, r) => s + r.lost, 0)} / ${group.reduce((s, r) => s + r.doubled, 0)} |`,
    );
  }
  lines.push(
    "",
    "Every run (ms; backfill rows/s; the breakdown is each part's own p99 from the results' `timing`, so the parts do not add up to the total):",
    "",
    "| variant | n | rate | # | alone p50 / p99 | beside p50 / p99 | beside p99: intake / queue / inference / commit | backfill alone → beside |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of rows)
    lines.push(
      `| ${r.variant} | ${r.instances} | ${r.rate} | ${r.repeat} | ${r.aloneP50.toFixed(0)} / ${r.aloneP99.toFixed(0)} | ${r.besideP50.toFixed(0)} / ${r.besideP99.toFixed(0)} | ${r.besideParts} | ${r.backfillAlone.toFixed(1)} → ${r.backfillBeside.toFixed(1)} |`,
    );
  lines.push(
    "",
    `Guard log lines (engaged / released, all instances): ${Object.entries(guardLines)
      .map(([k, v]) => `${k}: ${v.engaged} / ${v.released}`)
      .join("; ")}.`,
  );
  return lines.join("\n");
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
