/**
 * Upgrade benchmark (issue 28, docs/model-upgrades.md): what a candidate costs and what the online
 * tail does while it is used. `sluice serve` runs as a separate process with the default int8
 * BGE-small as the serving model and the fp32 BGE-small (`sluice model fetch --fp32`) as the candidate;
 * requests are paragraphs of realistic length; results are read by a read_committed reader, latency
 * from the broker's append time (LogAppendTime) to the reader's arrival (as bench/slo-bench.ts).
 * Measures, never asserts. Per repeat:
 *  1. start-up without and with the candidate: seconds from spawn to /readyz, the process's resident
 *     memory (VmRSS) once ready, and the candidate's own `model loaded` line (rssMiB, loadMs);
 *  2. online alone at BENCH_UPGRADE_RATE for BENCH_UPGRADE_ALONE_SECONDS: steady p50/p99;
 *  3. online beside `backfill submit --model candidate` of BENCH_UPGRADE_ROWS rows: the online p99 of
 *     requests appended while it ran, and the backfill's rate;
 *  4. online while `sluice model promote` runs, then `sluice model rollback`: the online p99 of
 *     requests appended from the command's start until 1 s after it returned (the switch window),
 *     against the goal 1.5 × the steady p99 of the online model on either side + 25 ms (before a
 *     rollback that is the promoted model's steady p99).
 *
 *   npm run bench:upgrade
 *   env: KAFKA_BROKERS; BENCH_UPGRADE_REPEATS (3); BENCH_UPGRADE_RATE (10, requests/s);
 *        BENCH_UPGRADE_ALONE_SECONDS (20); BENCH_UPGRADE_ROWS (300); BENCH_UPGRADE_OUTPUT
 *        (BENCHMARKS.md; "-" prints)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { BGE_SMALL_FP32_MODEL, ensureMavenModel } from "../src/model/default-model.js";
import { benchBroker } from "./bench-broker.js";
import { loadParagraphs } from "./corpus.js";
import { machineDescription, writeBenchmarkSection } from "./report.js";
import {
  benchConfigYaml,
  benchReader,
  createBenchTopics,
  envNumber,
  log,
  median,
  p50,
  p99,
  type ResultReader,
  rate,
  runSluice,
  runTag,
  type Serving,
  sendOpenLoop,
  sleep,
  startServing,
  stopServing,
  submit,
  warmUp,
} from "./serve-harness.js";

const num = envNumber;
const REPEATS = num("BENCH_UPGRADE_REPEATS", 3);
const RATE = num("BENCH_UPGRADE_RATE", 10);
const ALONE_SECONDS = num("BENCH_UPGRADE_ALONE_SECONDS", 20);
const ROWS = num("BENCH_UPGRADE_ROWS", 300);
const OUTPUT = process.env.BENCH_UPGRADE_OUTPUT ?? "";
const PARTITIONS = 4;

interface Row {
  repeat: number;
  startS: { without: number; with: number };
  rssMiB: { without: number; with: number };
  candidateLoad: { rssMiB: number; loadMs: number };
  steady: { p50: number; p99: number };
  backfill: { p99: number; rowsPerSec: number; rows: number };
  promote: SwitchFigures;
  rollback: SwitchFigures;
  lost: number;
  doubled: number;
}

/** One switch under load: the tail in its recorded window, around the command, and after it. */
interface SwitchFigures {
  p99: number;
  n: number;
  windowS: number;
  commandP99: number;
  seconds: number;
  /** The new online model's own steady p99 after the switch. */
  afterP99: number;
}

function rssMiB(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Math.round(Number(m[1]) / 1024) : Number.NaN;
}

async function startTimed(configPath: string, dir: string): Promise<{ serving: Serving; seconds: number }> {
  const t0 = performance.now();
  const serving = await startServing(configPath, 1, true, dir);
  return { serving, seconds: (performance.now() - t0) / 1000 };
}

/** Online latencies (ms) of requests appended in [from, to) (epoch ms). */
function window(reader: ResultReader, prefix: string, from: number, to: number): number[] {
  return reader
    .entries(prefix)
    .filter((a) => a.appendedMs >= from && a.appendedMs < to)
    .map((a) => a.arrivedMs - a.appendedMs);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const broker = await benchBroker();
  const kafka = new Kafka({ clientId: "upgrade-bench", brokers: broker.brokers, logLevel: logLevel.NOTHING });
  fixAbortedTransactionOrder();
  const candidate = await ensureMavenModel(BGE_SMALL_FP32_MODEL, { log });
  const onlineTexts = loadParagraphs(2000, 1);
  const corpus = loadParagraphs(ROWS, 2);
  const dir = mkdtempSync(join(tmpdir(), "sluice-upgrade-"));
  const corpusFile = join(dir, "corpus.jsonl");
  writeFileSync(
    corpusFile,
    `${corpus.map((text, i) => JSON.stringify({ id: `doc-${i}`, text })).join("\n")}\n`,
  );
  const producer = kafka.producer();
  await producer.connect();
  const admin = kafka.admin();
  await admin.connect();
  const rows: Row[] = [];
  try {
    for (let repeat = 1; repeat <= REPEATS; repeat++) {
      const base = `upgrade-${runTag}-${repeat}`;
      const requests = `${base}.requests`;
      const _results = `${base}.results`;
      await createBenchTopics(admin, base, PARTITIONS);
      const config = (withCandidate: boolean) => {
        const path = join(dir, `${base}-${withCandidate ? "with" : "without"}.yaml`);
        writeFileSync(
          path,
          benchConfigYaml(
            broker.brokers,
            base,
            withCandidate
              ? ["candidate:", `  name: ${BGE_SMALL_FP32_MODEL.name}`, `  path: ${candidate.modelPath}`]
              : [],
          ),
        );
        return path;
      };
      log(`repeat ${repeat}: start-up without the candidate`);
      const plain = await startTimed(config(false), dir);
      const rssWithout = rssMiB(plain.serving.procs[0]?.pid);
      await stopServing(plain.serving);
      log(`repeat ${repeat}: start-up with the candidate`);
      const withPath = config(true);
      const served = await startTimed(withPath, dir);
      const rssWith = rssMiB(served.serving.procs[0]?.pid);
      const loaded = /"role":"candidate","rssMiB":(\d+),"loadMs":(\d+)/.exec(
        readFileSync(served.serving.logs[0] as string, "utf8"),
      );
      const reader = await benchReader(kafka, base);
      try {
        await warmUp(producer, base, onlineTexts);
        // 1. steady
        const t1 = Date.now();
        const alone = await sendOpenLoop({
          producer,
          topic: requests,
          rate: RATE,
          prefix: "alone-",
          texts: onlineTexts,
          maxSeconds: ALONE_SECONDS,
        });
        await reader.waitFor("alone-", alone, 60_000);
        const steady = window(reader, "alone-", t1, Date.now());
        // 2. beside a candidate backfill
        let backfillDone = false;
        const beside = sendOpenLoop({
          producer,
          topic: requests,
          rate: RATE,
          prefix: "bf-",
          texts: onlineTexts,
          maxSeconds: 600,
          stop: () => backfillDone,
        });
        await sleep(2000);
        const bfFrom = Date.now();
        await submit(withPath, corpusFile, `${base}-corpus`, ["--model", "candidate"]);
        await reader.waitFor("doc-", ROWS, 600_000);
        const bfTo = Date.now();
        backfillDone = true;
        const besideSent = await beside;
        await reader.waitFor("bf-", besideSent, 60_000);
        const backfillLat = window(reader, "bf-", bfFrom, bfTo);
        const bfRate = rate(reader.entries("doc-").map((a) => a.arrivedMs));
        // 3. promote, then rollback, under online load
        // The switch window: from 1 s before the decision was written to 1 s after the last partition's
        // boundary (the times the control topic records), so the command's own start-up and model
        // hashing on this shared machine are not counted as the switch.
        const recorded = async (seq: number): Promise<{ from: number; to: number }> => {
          const { stdout: out } = await runSluice(withPath, ["model", "status", "--json"]);
          const st = JSON.parse(out) as {
            decisions: { seq: number; decidedAt: string }[];
            partitions: { boundary: { seq: number; switchedAt: string } | null }[];
          };
          const decided = Date.parse(st.decisions.find((d) => d.seq === seq)?.decidedAt ?? "");
          const last = Math.max(
            ...st.partitions.map((p) => (p.boundary?.seq === seq ? Date.parse(p.boundary.switchedAt) : 0)),
          );
          return { from: decided - 1000, to: last + 1000 };
        };
        let seq = 0;
        const switchWindow = async (prefix: string, args: string[]) => {
          let stop = false;
          const sending = sendOpenLoop({
            producer,
            topic: requests,
            rate: RATE,
            prefix,
            texts: onlineTexts,
            maxSeconds: 600,
            stop: () => stop,
          });
          await sleep(3000);
          const from = Date.now();
          const { seconds } = await runSluice(withPath, args);
          await sleep(1000);
          const to = Date.now();
          // After the switch: the new online model alone, its own steady tail.
          await sleep(ALONE_SECONDS * 1000);
          const afterFrom = to + 2000;
          stop = true;
          const sent = await sending;
          await reader.waitFor(prefix, sent, 60_000);
          const w = await recorded(++seq);
          const lat = window(reader, prefix, w.from, w.to);
          // Where the slowest requests of the window spent their time (the parts of the result's timing).
          const slowest = reader
            .entries(prefix)
            .filter((a) => a.appendedMs >= w.from && a.appendedMs < w.to)
            .sort((a, b) => b.arrivedMs - b.appendedMs - (a.arrivedMs - a.appendedMs))
            .slice(0, 3)
            .map(
              (a) =>
                `${a.arrivedMs - a.appendedMs} ms appended ${a.appendedMs - (w.from + 1000)} ms after the decision (intake ${a.intakeMs}, queue ${a.queueMs}, inference ${a.inferenceMs}, commit ${a.commitMs})`,
            );
          log(`${args[1]} window: slowest ${slowest.join("; ")}`);
          const command = window(reader, prefix, from, to);
          const after = window(reader, prefix, afterFrom, Date.now());
          return {
            p99: p99(lat),
            n: lat.length,
            windowS: (w.to - w.from) / 1000,
            commandP99: p99(command),
            seconds,
            afterP99: p99(after),
            sent,
          };
        };
        const promote = await switchWindow("pr-", ["model", "promote", "--timeout", "60000"]);
        const rollback = await switchWindow("rb-", ["model", "rollback", "--timeout", "60000"]);
        let lost = 0;
        let doubled = 0;
        for (const [prefix, n] of [
          ["alone-", alone],
          ["bf-", besideSent],
          ["doc-", ROWS],
          ["pr-", promote.sent],
          ["rb-", rollback.sent],
        ] as const) {
          lost += n - reader.count(prefix);
        }
        for (const a of reader.seen.values()) if (a.count > 1) doubled++;
        const row: Row = {
          repeat,
          startS: { without: plain.seconds, with: served.seconds },
          rssMiB: { without: rssWithout, with: rssWith },
          candidateLoad: {
            rssMiB: Number(loaded?.[1] ?? Number.NaN),
            loadMs: Number(loaded?.[2] ?? Number.NaN),
          },
          steady: { p50: p50(steady), p99: p99(steady) },
          backfill: { p99: p99(backfillLat), rowsPerSec: bfRate, rows: ROWS },
          promote,
          rollback,
          lost,
          doubled,
        };
        rows.push(row);
        log(`repeat ${repeat}: ${JSON.stringify(row)}`);
      } finally {
        await reader.stop();
        await stopServing(served.serving);
      }
    }
  } finally {
    await producer.disconnect();
    await admin.disconnect();
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const section = report(rows, startedAt, broker.note);
  if (OUTPUT === "-") process.stdout.write(`${section}\n`);
  else await writeBenchmarkSection("upgrade", section, OUTPUT || undefined);
}

function report(rows: Row[], startedAt: Date, brokerNote: string): string {
  // The goal against the steady tail of the model online answers with on either side of the switch:
  // before a promote that is the serving model's steady tail; before a rollback, the promoted
  // model's (the promote's after-switch p99), since it answers every request up to the boundary.
  const limit = (before: number, w: SwitchFigures) => 1.5 * Math.max(before, w.afterP99) + 25;
  const sw = (before: number, w: SwitchFigures) =>
    `${w.p99.toFixed(0)} (n ${w.n}, ${w.windowS.toFixed(1)} s) · ${w.commandP99.toFixed(0)} · ${w.afterP99.toFixed(0)} · ≤ ${limit(before, w).toFixed(0)} ${w.p99 <= limit(before, w) ? "yes" : "no"}`;
  const lines = [
    `Measured ${startedAt.toISOString().slice(0, 10)} on ${machineDescription()}, ${brokerNote}; one \`sluice serve\` (\`model.workers: auto\`), serving the int8 default, candidate the fp32 \`${BGE_SMALL_FP32_MODEL.name}\`; online ${RATE} requests/s of paragraphs over ${PARTITIONS} partitions; ${rows.length} repeats. Latency = reader arrival − broker append time.`,
    "",
    "Switch columns: p99 in the recorded switch window (1 s before the decision to 1 s after the last boundary; requests in it, its length) · p99 from the command's start to 1 s after it returned · the new online model's steady p99 after the switch · the goal 1.5 × the larger steady p99 of the online model before and after the switch (before a rollback: the promoted model's) + 25 ms, met?",
    "",
    "| # | start-up s: without → with candidate | RSS MiB: without → with | candidate's own load (rssMiB, ms) | steady p50 / p99 ms | p99 beside a candidate backfill ms (rows/s) | promote | rollback | lost / doubled |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows)
    lines.push(
      `| ${r.repeat} | ${r.startS.without.toFixed(1)} → ${r.startS.with.toFixed(1)} | ${r.rssMiB.without} → ${r.rssMiB.with} | ${r.candidateLoad.rssMiB}, ${r.candidateLoad.loadMs} | ${r.steady.p50.toFixed(0)} / ${r.steady.p99.toFixed(0)} | ${r.backfill.p99.toFixed(0)} (${r.backfill.rowsPerSec.toFixed(1)}) | ${sw(r.steady.p99, r.promote)} | ${sw(r.promote.afterP99, r.rollback)} | ${r.lost} / ${r.doubled} |`,
    );
  const m = (f: (r: Row) => number) => median(rows.map(f));
  lines.push(
    "",
    `Medians: start-up +${(m((r) => r.startS.with) - m((r) => r.startS.without)).toFixed(1)} s and +${(m((r) => r.rssMiB.with) - m((r) => r.rssMiB.without)).toFixed(0)} MiB resident with the candidate; steady p99 ${m((r) => r.steady.p99).toFixed(0)} ms, beside the candidate backfill ${m((r) => r.backfill.p99).toFixed(0)} ms, promote window ${m((r) => r.promote.p99).toFixed(0)} ms (fp32 online after it: ${m((r) => r.promote.afterP99).toFixed(0)} ms), rollback window ${m((r) => r.rollback.p99).toFixed(0)} ms.`,
  );
  return lines.join("\n");
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
