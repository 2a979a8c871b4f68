/**
 * SLO benchmark (issues 19 and 29): the online tail beside a backfill, measured the way users run
 * Sluice. `sluice serve` runs as separate processes (`node bin/sluice.js serve`, children of this one
 * process, as if started from one shell session; 1 and 2 instances on this machine, the default
 * model, `model.workers: auto`); requests are paragraphs of realistic length (`loadParagraphs`:
 * ~10–256 tokens), each with a deadline BENCH_SLO_DEADLINE_S after its scheduled send; backfills go
 * in with `sluice backfill submit`; results are read by a `read_committed` reader. Measures, never
 * asserts.
 *
 * The latency clock starts at the broker: the requests topic uses LogAppendTime, so a result's
 * `timing.requestTimestamp` is the broker's append time, and latency = the reader's arrival time −
 * that. On a saturated shared machine the load generator stalls too; counted from its scheduled send
 * time the same runs read far worse (docs/design.md §3, "Where a latency clock starts").
 *
 * Per variant (below) and instance count: a backfill alone of BENCH_SLO_ROWS rows (its rate between
 * the 10 % and the 90 % result); then per repeat and rate:
 *  1. online alone at that rate for BENCH_SLO_ALONE_SECONDS: p50/p99, expired;
 *  2. online at that rate, and 2 s in a backfill of BENCH_SLO_ROWS rows: the **window** is the
 *     BENCH_SLO_WINDOW_S seconds starting BENCH_SLO_WINDOW_DELAY_S after the submit returned (the
 *     moment a user notices: the start of a backfill); its online p99 and expired requests, and
 *     those of the first seconds (the submit to the window), and of the whole backfill; the
 *     backfill's rate; the machine's run queue (`procs_running`, sampled every 250 ms), the CPU
 *     pressure's worst second (`/proc/pressure/cpu` "some") and the
 *     broker's CPU per second in the window; the serve processes' event-loop delay in the window
 *     (max and p99 from their /metrics) and their online transactions committed in it (count, and
 *     the bucket of the p99 of `sluice_transaction_duration_seconds`) and their Kafka requests
 *     slower than 100 ms in it, by API (`sluice_kafka_request_duration_seconds`); partitions revoked in the
 *     serve logs during the run (a session timeout or a fenced broker shows as a rebalance).
 * Every online id and every backfill id must arrive exactly once (counted at the reader). The
 * report lists the worst run first.
 *
 *   npm run bench:slo
 *   env: KAFKA_BROKERS; BENCH_SLO_INSTANCES ("1,2"); BENCH_SLO_RATES ("10", requests/s);
 *        BENCH_SLO_REPEATS ("1:5,2:10": repeats per instance count, or one number for all);
 *        BENCH_SLO_ALONE_SECONDS (25); BENCH_SLO_ROWS (3000); BENCH_SLO_WINDOW_S (25);
 *        BENCH_SLO_WINDOW_DELAY_S (3); BENCH_SLO_DEADLINE_S (5);
 *        BENCH_SLO_VARIANTS ("nice"; the first gets BENCH_SLO_REPEATS, the others
 *        BENCH_SLO_REPEATS_OTHER (2, or "n:repeats" pairs as above), side by side in the same run):
 *        nice = the defaults (guard on, backfill workers at nice 10, idle CPU kept by
 *        lanes.cpuHeadroomCores auto), noheadroom = the defaults but lanes.cpuHeadroomCores 0,
 *        shared = guard on, model.backfillWorkers 0 (backfill calls share the online workers),
 *        off = lanes.guard false and shared workers;
 *        BENCH_SLO_OUTPUT (BENCHMARKS.md; "-" prints)
 *   smoke: BENCH_SLO_INSTANCES=1 BENCH_SLO_RATES=5 BENCH_SLO_REPEATS=1 BENCH_SLO_ALONE_SECONDS=4 \
 *          BENCH_SLO_ROWS=60 BENCH_SLO_WINDOW_S=4 BENCH_SLO_OUTPUT=- npm run bench:slo
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { benchBroker } from "./bench-broker.js";
import { loadParagraphs } from "./corpus.js";
import { CpuSampler, listenerPid } from "./proc-cpu.js";
import { machineDescription, percentile, writeBenchmarkSection } from "./report.js";
import {
  benchConfigYaml,
  benchReader,
  createBenchTopics,
  envNumber,
  log,
  median,
  p50,
  p99,
  rate,
  runTag,
  sendOpenLoop,
  sleep,
  startServing,
  stopServing,
  submit,
  warmUp,
} from "./serve-harness.js";
import { type ThreadGroupCpu, ThreadSampler, threadTable } from "./thread-cpu.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
const num = envNumber;
const INSTANCES = list("BENCH_SLO_INSTANCES", "1,2").map(Number);
const RATES = list("BENCH_SLO_RATES", "10").map(Number);
/** Repeats of the first variant per instance count ("1:5,2:10"), or one number for every count. */
const REPEATS_SPEC = process.env.BENCH_SLO_REPEATS ?? "1:5,2:10";
/** Repeats for `n` instances from a spec: one number for all, or "n:repeats" pairs (5 for an n not named). */
const repeatsIn = (spec: string, n: number): number => {
  if (/^\d+$/.test(spec.trim())) return Number(spec);
  const pair = spec
    .split(",")
    .map((p) => p.trim())
    .find((p) => p.startsWith(`${n}:`));
  return pair ? Number(pair.split(":")[1]) : 5;
};
const repeatsFor = (n: number): number => repeatsIn(REPEATS_SPEC, n);
/** Repeats of the comparison variants (all but the first). */
const REPEATS_OTHER_SPEC = process.env.BENCH_SLO_REPEATS_OTHER ?? "2";
const repeatsOther = (n: number): number => repeatsIn(REPEATS_OTHER_SPEC, n);
const ALONE_SECONDS = num("BENCH_SLO_ALONE_SECONDS", 25);
const ROWS = num("BENCH_SLO_ROWS", 3000);
const WINDOW_MS = num("BENCH_SLO_WINDOW_S", 25) * 1000;
const WINDOW_DELAY_MS = num("BENCH_SLO_WINDOW_DELAY_S", 3) * 1000;
const DEADLINE_MS = num("BENCH_SLO_DEADLINE_S", 5) * 1000;
/** What each variant sets on the served instances. */
const VARIANT_SETTINGS: Record<
  string,
  { guard: boolean; backfillWorkers: string; label: string; lanes?: string[] }
> = {
  nice: {
    guard: true,
    backfillWorkers: "auto",
    label: "defaults: guard on, backfill workers at nice 10, `lanes.cpuHeadroomCores: auto`",
  },
  noheadroom: {
    guard: true,
    backfillWorkers: "auto",
    label: "the defaults but `lanes.cpuHeadroomCores: 0` (no idle CPU kept)",
    lanes: ["  cpuHeadroomCores: 0"],
  },
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

/** A share as a whole percentage ("–" when not measured). */
const pct = (share: number): string => (Number.isFinite(share) ? `${Math.round(share * 100)} %` : "–");

interface RunRow {
  variant: string;
  instances: number;
  rate: number;
  repeat: number;
  aloneP50: number;
  aloneP99: number;
  aloneExpired: number;
  /** The window (BENCH_SLO_WINDOW_S from BENCH_SLO_WINDOW_DELAY_S after the submit returned). */
  windowP50: number;
  windowP99: number;
  windowN: number;
  windowExpired: number;
  /** From the submit's start to the window's: the first seconds. */
  firstP99: number;
  firstN: number;
  /** Every online request appended while the backfill's results arrived. */
  besideP99: number;
  besideExpired: number;
  backfillAlone: number;
  backfillBeside: number;
  /** In the window: the run queue's largest and mean sample, the broker's least and mean cores per second. */
  runQueueMax: number;
  runQueueMean: number;
  /** The kernel's CPU pressure ("some") in the window's worst second, 0..1 (NaN without PSI). */
  pressureMax: number;
  brokerCoresMin: number;
  brokerCoresMean: number;
  /** `partitions revoked` log lines of the serve processes during the run. */
  revoked: number;
  /** The serve processes' event-loop delay in the window (the worst instance): max and p99, ms. */
  loopMaxMs: number;
  loopP99Ms: number;
  /** Online transactions committed in the window (all instances), and the bucket bound of their p99, ms. */
  onlineTxnP99Ms: number;
  onlineTxnN: number;
  /** Kafka requests slower than SLOW_REQUEST_MS in the window, Fetch aside, all instances: "api n, …". */
  slowRequests: string;
  lost: number;
  doubled: number;
  /** p99 of each part of the window's latency (intake, queue, inference, commit), ms. */
  windowParts: string;
  /** The same for the first seconds. */
  firstParts: string;
  /**
   * Thread groups of the serve processes and the broker in the first seconds, over the window and
   * in its busiest second (largest mean run queue), with the machine's busy cores in each.
   */
  threads: { name: string; groups: ThreadGroupCpu[]; machineCores: number }[];
  busiestAt: number;
}

/** The issue-29 goal of one run: the window's tail, no expiry or rebalance the backfill caused. */
const goalMet = (r: RunRow) =>
  r.windowP99 <= 1.5 * r.aloneP99 + 25 &&
  r.windowExpired <= r.aloneExpired &&
  r.revoked === 0 &&
  r.backfillBeside >= 0.5 * r.backfillAlone &&
  r.lost === 0 &&
  r.doubled === 0;

/** How far a run's window p99 is past its goal (ms; negative: under it): the report's order. */
const overGoal = (r: RunRow) => r.windowP99 - (1.5 * r.aloneP99 + 25);

/** What one scrape of a serve process's /metrics tells the report. */
interface ServeScrape {
  /** Event-loop delay since the previous scrape (prom-client's histogram, reset at every scrape), ms. */
  maxMs: number;
  p99Ms: number;
  /** Committed online transactions so far, cumulative per bucket: upper bound (ms) → count. */
  onlineTxn: Map<number, number>;
  /** Kafka requests so far by API: all of them, and those within SLOW_REQUEST_MS. */
  requests: Map<string, { all: number; fast: number }>;
}

/** A Kafka request slower than this counts as slow in the report (a histogram bucket bound, ms). */
const SLOW_REQUEST_MS = 100;

/** Scrapes every serve process's /metrics (and so resets their event-loop histograms). */
async function scrapeServe(ports: readonly number[]): Promise<ServeScrape[]> {
  return Promise.all(
    ports.map(async (port) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text().catch(() => "");
      const gauge = (name: string) =>
        1000 * Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN);
      const onlineTxn = new Map<number, number>();
      for (const m of text.matchAll(/^sluice_transaction_duration_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
        const labels = m[1] as string;
        if (!labels.includes('lane="online"') || !labels.includes('outcome="committed"')) continue;
        const le = /le="([^"]+)"/.exec(labels)?.[1] ?? "+Inf";
        onlineTxn.set(le === "+Inf" ? Number.POSITIVE_INFINITY : 1000 * Number(le), Number(m[2]));
      }
      const requests = new Map<string, { all: number; fast: number }>();
      for (const m of text.matchAll(/^sluice_kafka_request_duration_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
        const labels = m[1] as string;
        const api = /api="([^"]+)"/.exec(labels)?.[1] ?? "?";
        const le = /le="([^"]+)"/.exec(labels)?.[1] ?? "+Inf";
        const entry = requests.get(api) ?? { all: 0, fast: 0 };
        if (le === "+Inf") entry.all = Number(m[2]);
        else if (1000 * Number(le) === SLOW_REQUEST_MS) entry.fast = Number(m[2]);
        requests.set(api, entry);
      }
      return {
        maxMs: gauge("nodejs_eventloop_lag_max_seconds"),
        p99Ms: gauge("nodejs_eventloop_lag_p99_seconds"),
        onlineTxn,
        requests,
      };
    }),
  );
}

/**
 * The online transactions committed between two scrapes of the same processes: how many, and the
 * bucket bound their p99 is under (ms; the histogram's buckets, so "≤ 50" means in (25, 50]).
 */
function onlineTxnBetween(
  from: readonly ServeScrape[],
  to: readonly ServeScrape[],
): { n: number; p99Ms: number } {
  // No scrape at the window's start (the run ended before it): nothing to subtract, so no figure.
  if (from.length !== to.length) return { n: Number.NaN, p99Ms: Number.NaN };
  const bounds = [...new Set(to.flatMap((s) => [...s.onlineTxn.keys()]))].sort((a, b) => a - b);
  const count = (le: number) =>
    to.reduce((a, s, i) => a + (s.onlineTxn.get(le) ?? 0) - (from[i]?.onlineTxn.get(le) ?? 0), 0);
  const n = count(Number.POSITIVE_INFINITY);
  const p99Ms = bounds.find((le) => count(le) >= 0.99 * n) ?? Number.NaN;
  return { n, p99Ms: n > 0 ? p99Ms : Number.NaN };
}

/**
 * Kafka requests slower than SLOW_REQUEST_MS between two scrapes of the same processes, by API, Fetch
 * aside (a Fetch waits at the broker when there is nothing new): "Produce 2, EndTxn 1", or "0".
 */
function slowRequestsBetween(from: readonly ServeScrape[], to: readonly ServeScrape[]): string {
  if (from.length !== to.length) return "–";
  const slow = new Map<string, number>();
  to.forEach((s, i) => {
    for (const [api, now] of s.requests) {
      if (api === "Fetch") continue;
      const before = from[i]?.requests.get(api) ?? { all: 0, fast: 0 };
      const n = now.all - now.fast - (before.all - before.fast);
      if (n > 0) slow.set(api, (slow.get(api) ?? 0) + n);
    }
  });
  const listed = [...slow].sort((a, b) => b[1] - a[1]).map(([api, n]) => `${api} ${n}`);
  return listed.length > 0 ? listed.join(", ") : "0";
}

/** `partitions revoked` lines in the serve logs now. */
function revocations(logs: readonly string[]): number {
  let n = 0;
  for (const file of logs)
    n += (readFileSync(file, "utf8").match(/"msg":"partitions revoked"/g) ?? []).length;
  return n;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const broker = await benchBroker();
  // The broker's process when it runs on this machine (found by its listening port), else undefined.
  const brokerPid = listenerPid(Number(broker.brokers[0]?.split(":").at(-1)));
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
        const _results = `${base}.results`;
        const _backfillResults = `${base}.bresults`;
        await createBenchTopics(admin, base, PARTITIONS);
        const configPath = join(dir, `${base}.yaml`);
        writeFileSync(
          configPath,
          benchConfigYaml(broker.brokers, base, [
            "model:",
            `  backfillWorkers: ${variant.backfillWorkers}`,
            ...(variant.lanes ? ["lanes:", ...variant.lanes] : []),
          ]),
        );
        log(`${mode} (${variant.label}), ${n} instance(s): starting sluice serve`);
        const serving = await startServing(configPath, n, variant.guard, dir);
        const reader = await benchReader(kafka, base);
        try {
          await warmUp(producer, base, onlineTexts);
          log(
            `warm-up: ${(await reader.waitFor("warm-", 15, 60_000)) ? "results arrive" : "NO results in 60 s"}`,
          );
          const aloneRun = "alone";
          const aloneFile = join(dir, `${base}-${aloneRun}.jsonl`);
          writeFileSync(
            aloneFile,
            backfillTexts
              .slice(0, ROWS)
              .map((text, i) => JSON.stringify({ id: `${aloneRun}-${i}`, text }))
              .join("\n"),
          );
          await submit(configPath, aloneFile, aloneRun);
          await reader.waitFor(`${aloneRun}-`, ROWS, 900_000);
          const backfillAlone = rate(reader.entries(`${aloneRun}-`).map((e) => e.arrivedMs));
          log(`backfill alone: ${backfillAlone.toFixed(1)} rows/s`);
          const repeats = variantIndex === 0 ? repeatsFor(n) : repeatsOther(n);
          for (let r = 0; r < repeats; r++) {
            for (const rt of RATES) {
              const alonePrefix = `a${r}r${rt}-`;
              const aloneSent = await sendOpenLoop({
                producer,
                topic: requests,
                rate: rt,
                prefix: alonePrefix,
                texts: onlineTexts,
                maxSeconds: ALONE_SECONDS,
                deadlineAfterMs: DEADLINE_MS,
              });
              await reader.waitFor(alonePrefix, aloneSent, 60_000);
              const aloneEntries = reader.entries(alonePrefix);
              const aloneLat = aloneEntries.map((e) => e.arrivedMs - e.appendedMs);
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
              let windowOver = false;
              const revokedBefore = revocations(serving.logs);
              const sampler = new CpuSampler({ broker: brokerPid }, 250);
              const threadSampler = new ThreadSampler(
                {
                  ...Object.fromEntries(serving.procs.map((p, i) => [`serve-${i + 1}`, p.pid])),
                  broker: brokerPid,
                },
                250,
              );
              const online = sendOpenLoop({
                producer,
                topic: requests,
                rate: rt,
                prefix,
                texts: onlineTexts,
                maxSeconds: 900,
                stop: () => backfillDone && windowOver,
                deadlineAfterMs: DEADLINE_MS,
              });
              await sleep(2000);
              const submitAt = Date.now();
              await submit(configPath, file, run);
              const windowFrom = Date.now() + WINDOW_DELAY_MS;
              const windowTo = windowFrom + WINDOW_MS;
              // Scraping resets each instance's event-loop histogram: at the window's start, and its end.
              let atWindowStart: Promise<ServeScrape[]> = Promise.resolve([]);
              const loopReset = setTimeout(() => {
                atWindowStart = scrapeServe(serving.ports);
              }, windowFrom - Date.now());
              let loopInWindow: Promise<ServeScrape[]> = Promise.resolve([]);
              const windowTimer = setTimeout(() => {
                windowOver = true;
                loopInWindow = scrapeServe(serving.ports);
              }, windowTo - Date.now());
              await reader.waitFor(`${run}-`, ROWS, 900_000);
              backfillDone = true;
              const sent = await online;
              clearTimeout(windowTimer);
              clearTimeout(loopReset);
              const loop = await loopInWindow;
              const onlineTxn = onlineTxnBetween(await atWindowStart, loop);
              const slowRequests = slowRequestsBetween(await atWindowStart, loop);
              sampler.stop();
              threadSampler.stop();
              await reader.waitFor(prefix, sent, 60_000);
              const revoked = revocations(serving.logs) - revokedBefore;
              const bf = reader
                .entries(`${run}-`)
                .map((e) => e.arrivedMs)
                .sort((a, b) => a - b);
              const from = bf[0] ?? 0;
              const to = bf[bf.length - 1] ?? 0;
              const entries = reader.entries(prefix);
              const appendedIn = (lo: number, hi: number) =>
                entries.filter((e) => e.appendedMs >= lo && e.appendedMs < hi);
              const latency = (es: typeof entries) => es.map((e) => e.arrivedMs - e.appendedMs);
              const expired = (es: typeof entries) => es.filter((e) => e.status === "expired").length;
              const windowEntries = appendedIn(windowFrom, windowTo);
              const first = appendedIn(submitAt, windowFrom);
              const beside = appendedIn(from, to + 1);
              const parts = (es: typeof entries) =>
                (["intakeMs", "queueMs", "inferenceMs", "commitMs"] as const)
                  .map((k) => p99(es.map((e) => e[k])).toFixed(0))
                  .join(" / ");
              const runQueue = sampler.samples
                .filter((x) => x.at >= windowFrom && x.at < windowTo)
                .map((x) => x.ticks.running as number);
              // The window's busiest second: the largest mean run queue over four consecutive samples.
              const inWindow = sampler.samples.filter((x) => x.at >= windowFrom && x.at < windowTo);
              let busiestAt = windowFrom;
              let busiestQueue = -1;
              for (let i = 0; i + 4 <= inWindow.length; i++) {
                const q = inWindow.slice(i, i + 4).reduce((a, x) => a + (x.ticks.running as number), 0);
                if (q > busiestQueue) [busiestQueue, busiestAt] = [q, (inWindow[i] as { at: number }).at];
              }
              // The worst second of CPU pressure: "some" µs over four consecutive samples' span.
              let pressureMax = Number.NaN;
              for (let i = 0; i + 4 < inWindow.length; i++) {
                const a = inWindow[i] as { at: number; ticks: Record<string, number> };
                const b = inWindow[i + 4] as { at: number; ticks: Record<string, number> };
                const share =
                  ((b.ticks.pressureUs as number) - (a.ticks.pressureUs as number)) / ((b.at - a.at) * 1000);
                if (Number.isFinite(share) && !(share <= pressureMax)) pressureMax = share;
              }
              const brokerCores: number[] = [];
              for (
                let t = windowFrom;
                t + 1000 <= Math.min(windowTo, sampler.samples.at(-1)?.at ?? 0);
                t += 1000
              )
                brokerCores.push(sampler.between("broker", t, t + 1000));
              const prefixes = [prefix, `${run}-`, alonePrefix];
              const expected = [sent, ROWS, aloneSent];
              let lost = 0;
              let doubled = 0;
              prefixes.forEach((p, i) => {
                const got = reader.entries(p);
                lost += Math.max(0, (expected[i] as number) - got.length);
                doubled += got.filter((e) => e.count > 1).length;
              });
              const mean = (xs: number[]) =>
                xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length;
              const row: RunRow = {
                variant: mode,
                instances: n,
                rate: rt,
                repeat: r + 1,
                aloneP50: p50(aloneLat),
                aloneP99: p99(aloneLat),
                aloneExpired: expired(aloneEntries),
                windowP50: p50(latency(windowEntries)),
                windowP99: p99(latency(windowEntries)),
                windowN: windowEntries.length,
                windowExpired: expired(windowEntries),
                firstP99: p99(latency(first)),
                firstN: first.length,
                besideP99: p99(latency(beside)),
                besideExpired: expired(beside),
                backfillAlone,
                backfillBeside: rate(bf),
                runQueueMax: runQueue.length > 0 ? Math.max(...runQueue) : Number.NaN,
                runQueueMean: mean(runQueue),
                pressureMax,
                brokerCoresMin: brokerCores.length > 0 ? Math.min(...brokerCores) : Number.NaN,
                brokerCoresMean: mean(brokerCores),
                revoked,
                loopMaxMs: Math.max(...loop.map((l) => l.maxMs)),
                loopP99Ms: Math.max(...loop.map((l) => l.p99Ms)),
                onlineTxnP99Ms: onlineTxn.p99Ms,
                onlineTxnN: onlineTxn.n,
                slowRequests,
                lost,
                doubled,
                windowParts: parts(windowEntries),
                firstParts: parts(first),
                threads: (
                  [
                    ["first seconds", submitAt, windowFrom],
                    ["window", windowFrom, windowTo],
                    ["busiest second", busiestAt, busiestAt + 1000],
                  ] as const
                ).map(([name, a, b]) => ({
                  name,
                  groups: threadSampler.groups(a, b),
                  machineCores: sampler.between("machine", a, b) / ((b - a) / 1000),
                })),
                busiestAt: busiestAt - windowFrom,
              };
              rows.push(row);
              log(
                `${mode} n=${n} rate=${rt} #${r + 1}: online p99 alone ${row.aloneP99.toFixed(0)} ms, window ${row.windowP99.toFixed(0)} ms (×${(row.windowP99 / row.aloneP99).toFixed(2)}, ${row.windowExpired} expired), first seconds ${row.firstP99.toFixed(0)} ms; backfill ${row.backfillBeside.toFixed(1)}/${row.backfillAlone.toFixed(1)} rows/s; run queue max ${row.runQueueMax}, CPU pressure max ${pct(row.pressureMax)}, broker cores min ${row.brokerCoresMin.toFixed(2)}; revoked ${revoked}; lost ${lost}, doubled ${doubled}`,
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
  const markdown = report(rows, guardLines, startedAt, broker.note, onlineTexts, brokerPid !== undefined);
  if (OUTPUT === "-") process.stdout.write(`${markdown}\n`);
  else await writeBenchmarkSection("slo", markdown, OUTPUT || undefined);
}

function report(
  rows: RunRow[],
  guardLines: Record<string, { engaged: number; released: number }>,
  startedAt: Date,
  brokerNote: string,
  texts: string[],
  brokerSampled: boolean,
): string {
  const words = texts.map((t) => t.split(/\s+/).length).sort((a, b) => a - b);
  const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : "–");
  const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : "–");
  const lines: string[] = [
    "## SLO guard: online tail beside a backfill (`npm run bench:slo`)",
    "",
    `Run ${startedAt.toISOString()} on ${machineDescription()}; broker: ${brokerNote}.`,
    `\`sluice serve\` as separate processes (\`node bin/sluice.js serve\`, children of the benchmark's one process, default model, \`model.workers: auto\`), ${PARTITIONS} partitions per lane; online open-loop paragraphs (words per text p50 ${percentile(words, 50)}, p90 ${percentile(words, 90)}, p99 ${percentile(words, 99)}), each with a deadline ${DEADLINE_MS / 1000} s after its scheduled send, ${ALONE_SECONDS} s alone per repeat; backfills of ${ROWS} paragraphs by \`sluice backfill submit\`, submitted 2 s into the online load; latency = read_committed arrival − broker append time (LogAppendTime on the requests topic).`,
    `**Window**: the ${WINDOW_MS / 1000} s starting ${WINDOW_DELAY_MS / 1000} s after the submit returned (online requests appended in it); **first seconds**: from the submit's start to the window; **whole**: while the backfill's results arrived. Run queue: \`procs_running\` of /proc/stat every 250 ms in the window (threads runnable on the whole machine); CPU pressure: the kernel's \`/proc/pressure/cpu\` "some" over the window's worst second (the share of that second in which at least one runnable thread waited for a CPU); broker: its process's CPU per second in the window (${brokerSampled ? "found by its listening port" : "not on this machine: not sampled"}); event-loop delay: each serve process's over the window (its /metrics, \`nodejs_eventloop_lag_max_seconds\` and \`_p99_\`, scraped at the window's start and end), the worst instance; online transactions: the online partitions' transactions committed in the window, all instances (\`sluice_transaction_duration_seconds\` from the same scrapes), with the histogram bucket their p99 is under; Kafka requests > ${SLOW_REQUEST_MS} ms: the serve processes' Kafka requests in the window that took longer, by API, Fetch aside (\`sluice_kafka_request_duration_seconds\` from the same scrapes; a Fetch waits at the broker when there is nothing new); revoked: \`partitions revoked\` log lines of the serve processes during the run (a session timeout or a fenced broker shows as one).`,
    `Variants, side by side in this run: ${VARIANTS.map((v, i) => `**${v}** = ${VARIANT_SETTINGS[v]?.label} (${INSTANCES.map((n) => `${i === 0 ? repeatsFor(n) : repeatsOther(n)} repeats with ${n}`).join(", ")})`).join("; ")}.`,
    "Goal per run: window p99 ≤ 1.5 × online p99 alone + 25 ms, no more expired online requests than alone, no partition revoked, backfill beside ≥ 0.5 × alone, nothing lost or doubled.",
    "",
    "| variant | instances | online req/s | runs | window p99 ÷ alone: worst, median | worst run: p99 alone → window (first seconds) | goal met (runs) | expired in windows (alone) | revoked | backfill beside ÷ alone: worst, median | run queue max | broker cores min | event-loop delay max ms | lost / doubled |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  const keys = [...new Set(rows.map((r) => `${r.variant}|${r.instances}|${r.rate}`))];
  for (const key of keys) {
    const group = rows.filter((r) => `${r.variant}|${r.instances}|${r.rate}` === key);
    const first = group[0] as RunRow;
    const ratios = group.map((r) => r.windowP99 / r.aloneP99);
    const worst = group.reduce((a, b) => (overGoal(b) > overGoal(a) ? b : a));
    const bfRatios = group.map((r) => r.backfillBeside / r.backfillAlone);
    const sum = (k: keyof RunRow) => group.reduce((s, r) => s + (r[k] as number), 0);
    lines.push(
      `| ${first.variant} | ${first.instances} | ${first.rate} | ${group.length} | ×${f2(Math.max(...ratios))}, ×${f2(median(ratios))} | ${f0(worst.aloneP99)} → ${f0(worst.windowP99)} (${f0(worst.firstP99)}) ms | ${group.filter(goalMet).length}/${group.length} | ${sum("windowExpired")} (${sum("aloneExpired")}) | ${sum("revoked")} | ${f2(Math.min(...bfRatios))}, ${f2(median(bfRatios))} | ${Math.max(...group.map((r) => r.runQueueMax))} | ${f2(Math.min(...group.map((r) => r.brokerCoresMin)))} | ${f0(Math.max(...group.map((r) => r.loopMaxMs)))} | ${sum("lost")} / ${sum("doubled")} |`,
    );
  }
  lines.push(
    "",
    "Every run, worst first (ms; backfill rows/s; the breakdowns are each part's own p99 from the results' `timing`, so the parts do not add up to the total; commit = the reader's arrival − the result's `completedAt`):",
    "",
    `| variant | n | rate | # | alone p50 / p99 (expired) | window p50 / p99 (n, expired) | first seconds p99 (n): intake / queue / inference / commit | whole p99 (expired) | window p99: intake / queue / inference / commit | backfill alone → beside | run queue max / mean | CPU pressure, worst second | broker cores min / mean | event-loop delay max / p99 | online transactions: p99 (n) | Kafka requests > ${SLOW_REQUEST_MS} ms | revoked | goal |`,
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  );
  for (const r of [...rows].sort((a, b) => overGoal(b) - overGoal(a)))
    lines.push(
      `| ${r.variant} | ${r.instances} | ${r.rate} | ${r.repeat} | ${f0(r.aloneP50)} / ${f0(r.aloneP99)} (${r.aloneExpired}) | ${f0(r.windowP50)} / ${f0(r.windowP99)} (${r.windowN}, ${r.windowExpired}) | ${f0(r.firstP99)} (${r.firstN}): ${r.firstParts} | ${f0(r.besideP99)} (${r.besideExpired}) | ${r.windowParts} | ${r.backfillAlone.toFixed(1)} → ${r.backfillBeside.toFixed(1)} | ${r.runQueueMax} / ${f2(r.runQueueMean)} | ${pct(r.pressureMax)} | ${f2(r.brokerCoresMin)} / ${f2(r.brokerCoresMean)} | ${f0(r.loopMaxMs)} / ${f0(r.loopP99Ms)} | ≤ ${f0(r.onlineTxnP99Ms)} ms (${r.onlineTxnN}) | ${r.slowRequests} | ${r.revoked} | ${goalMet(r) ? "yes" : "no"} |`,
    );
  const worstRun = [...rows].sort((a, b) => overGoal(b) - overGoal(a))[0];
  if (worstRun !== undefined)
    lines.push(
      "",
      `What ran in the worst run (${worstRun.variant}, ${worstRun.instances} instance(s), #${worstRun.repeat}), per process and kind of thread (/proc/<pid>/task every 250 ms; name without its number, nice when not 0): cores and mean runnable threads in the first seconds, over the window and in its busiest second (the largest mean run queue, ${(worstRun.busiestAt / 1000).toFixed(1)} s into the window); busiest in the window first:`,
      "",
      ...threadTable(worstRun.threads, 1),
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
