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
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { fixAbortedTransactionOrder } from "../src/kafka/protocol/aborted-transaction-order.js";
import { benchBroker } from "./bench-broker.js";
import { loadParagraphs } from "./corpus.js";
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

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const list = (name: string, fallback: string) =>
  (process.env[name] ?? fallback)
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
const num = envNumber;
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
        const _results = `${base}.results`;
        const _backfillResults = `${base}.bresults`;
        await createBenchTopics(admin, base, PARTITIONS);
        const configPath = join(dir, `${base}.yaml`);
        writeFileSync(
          configPath,
          benchConfigYaml(broker.brokers, base, ["model:", `  backfillWorkers: ${variant.backfillWorkers}`]),
        );
        log(`${mode} (${variant.label}), ${n} instance(s): starting sluice serve`);
        const serving = await startServing(configPath, n, variant.guard, dir);
        const reader = await benchReader(kafka, base);
        try {
          await warmUp(producer, base, onlineTexts);
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
