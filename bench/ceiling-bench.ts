/**
 * Kafka-path ceiling against a JVM peer (issue 30): `sluice serve` and a Kafka Streams app doing the same
 * job, alternately, on one broker, over one pre-produced backlog.
 *
 *  - Sluice: `node bin/sluice.js serve` as its own process with a generated configuration file, as users
 *    run it (or several such processes in one consumer group, as replicas run); the no-op model
 *    (src/model/noop-model.ts, through bench/noop-serve.ts) for the text backlog, the tests' tiny
 *    logistic regression (`model.task: tensor`, V2 JSON in and out) for the tensor backlog. Defaults
 *    otherwise: transactions on, 100 ms commit interval.
 *  - Kafka Streams 3.9.1 (bench/kafka-streams/, built with Maven): `processing.guarantee=exactly_once_v2`,
 *    the default commit interval (100 ms under EOS), a logged (changelog-backed) in-memory dedup store
 *    keyed by request id, one result per record in Sluice's result shape: a zero embedding of 384
 *    floats for a text request, the same logistic regression (same weights, float32) for a V2 request.
 *  - The kafkajs floor (bench/kafkajs-floor.ts, both modes): kafkajs alone doing the least an
 *    exactly-once processor with a dedup store must do per record (in the logistic mode the regression
 *    inline, as Kafka Streams computes it), so Sluice's own cost shows apart from its client's, and what
 *    ×2 Kafka Streams asks of Sluice shows against what kafkajs alone does on this machine.
 *
 * Each run gets fresh output topics and a fresh consumer group / application id, so each side reads the
 * whole backlog from its start. Per run: the sustained rate from the first to the last result a
 * read_committed reader sees (the Java client's, bench/kafka-streams/…/ResultCounter.java), the process's
 * CPU-seconds (/proc/<pid>/stat utime + stime, sampled every 50 ms; the broker's and the reader's too)
 * and exactly-once (every request id exactly once among the committed results). Measures, never asserts a timing. Writes its section of
 * BENCHMARKS.md between the bench:ceiling markers.
 *
 *   npm run bench:ceiling
 *   env: KAFKA_BROKERS (else the project's local broker); BENCH_CEILING_RECORDS (600000 per
 *        backlog: the sustained rate; at 150000 the JVM peer still spends about a third of its CPU
 *        warming up, see BENCHMARKS.md, "The sustained rate");
 *        BENCH_CEILING_ROUNDS (3); BENCH_CEILING_MODES ("noop,logistic"); BENCH_CEILING_SLUICE_PROCESSES
 *        (how many `sluice serve` processes, members of one group, drain the backlog together, one set
 *        of runs each: "<partitions>,<cores>", so "3,2" here, as replicas of a Deployment would: one
 *        per partition fills this machine, one per core is the usual pod size);
 *        BENCH_CEILING_KSTREAMS_THREADS (Kafka Streams' num.stream.threads, one set of runs each:
 *        "<cores>,1", so "2,1" here: a stream thread per core, and one processing thread as Sluice's
 *        one event loop); BENCH_CEILING_FLOOR (1; 0 = no kafkajs floor side);
 *        BENCH_CEILING_START ("running": every run gets its own copy of the backlog, written in one
 *        open transaction, and commits it once the side's group is formed, so the backlog lands on
 *        members already running, as it does on a deployment's replicas; "cold": the side starts on a
 *        backlog that is already there, produced once before the runs, and a second member joins
 *        while the first drains);
 *        BENCH_CEILING_TIMEOUT_S (600 per run); BENCH_CEILING_QUIET_WAIT_S (120: the longest wait
 *        before a run for a quiet machine, see quietMachine); BENCH_CEILING_WARMUP (1; 0 = no
 *        unreported warm-up round before the first mode's rounds); BENCH_CEILING_MAX_REST_CORES (0.5)
 *        and BENCH_CEILING_ATTEMPTS (3): a run during which the rest of the machine was busier than that
 *        many cores is run again, at most that many times, and the least crowded attempt is kept;
 *        BENCH_CEILING_OUTPUT (BENCHMARKS.md; "-" prints); BENCH_CEILING_NODE_ARGS (node flags for
 *        serve, e.g. "--cpu-prof --cpu-prof-dir=DIR": bin/sluice.js runs serve in its own process,
 *        so the profile is serve's; bench/cpu-profile-summary.ts reads it)
 *   smoke: BENCH_CEILING_RECORDS=2000 BENCH_CEILING_ROUNDS=1 BENCH_CEILING_OUTPUT=- npm run bench:ceiling
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createWriteStream, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { type Admin, Kafka, logLevel, type Producer } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { createTinyTensorModels, LR_B, LR_W, lrReference } from "../test/support/tiny-tensor-onnx.js";
import { benchBroker } from "./bench-broker.js";
import { loadParagraphs } from "./corpus.js";
import { NOOP_SERVE_LINE } from "./noop-serve-hooks.js";
import { CLK_TCK, CpuSampler, listenerPid, machineBusy, procTicks } from "./proc-cpu.js";
import { benchmarksFile, machineDescription, percentile, writeBenchmarkSection } from "./report.js";

process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const RECORDS = num("BENCH_CEILING_RECORDS", 600_000);
const ROUNDS = num("BENCH_CEILING_ROUNDS", 3);
/** A list of positive counts ("2,1"), one set of runs each. */
const counts = (name: string, fallback: string) => [
  ...new Set(
    (process.env[name] ?? fallback)
      .split(",")
      .map((s) => Number(s.trim()))
      .filter((n) => Number.isInteger(n) && n > 0),
  ),
];
/** Kafka Streams' num.stream.threads, one set of runs each. */
const KSTREAMS_THREADS = counts("BENCH_CEILING_KSTREAMS_THREADS", `${cpus().length},1`);
/** Partitions of every backlog: as many `sluice serve` processes as these can share it. */
const PARTITIONS = 3;
/** How many `sluice serve` processes (members of one group) share the backlog, one set of runs each. */
const SLUICE_PROCESSES = counts("BENCH_CEILING_SLUICE_PROCESSES", `${PARTITIONS},${cpus().length}`);
const TIMEOUT_MS = num("BENCH_CEILING_TIMEOUT_S", 600) * 1000;
/** Whether the backlog lands on a running group ("running") or is there before the side starts ("cold"). */
const START = process.env.BENCH_CEILING_START ?? "running";
if (START !== "running" && START !== "cold")
  throw new Error(`BENCH_CEILING_START: unknown ${START}; use running or cold`);
/** Where the report's time to the last result starts. */
const SPAN_FROM = START === "running" ? "landing" : "spawn";
/** How long the side's group is left formed before the backlog lands (its restores, its first fetch). */
const SETTLE_MS = 1000;
const WARMUP = (process.env.BENCH_CEILING_WARMUP ?? "1") !== "0";
const QUIET_WAIT_MS = num("BENCH_CEILING_QUIET_WAIT_S", 120) * 1000;
/** A run whose rest of the machine was busier than this (cores, on average over its window) is run again. */
const MAX_REST_CORES = num("BENCH_CEILING_MAX_REST_CORES", 0.5);
const ATTEMPTS = num("BENCH_CEILING_ATTEMPTS", 3);
/** A run starts after 3 s in which the machine, the broker aside, was busy less than this many cores. */
const QUIET_CORES = 0.25;
const OUTPUT = process.env.BENCH_CEILING_OUTPUT ?? "";
/** Ids below this are kept by the reader and compared between the sides. */
const SAMPLE = 200;

type Mode = "noop" | "logistic";
/**
 * BENCH_CEILING_FLOOR ("1"; "0" = off): also the kafkajs floor (bench/kafkajs-floor.ts), in both modes:
 * kafkajs alone doing the least an exactly-once processor must do per record, to tell the client's
 * cost from Sluice's own.
 */
const FLOOR = (process.env.BENCH_CEILING_FLOOR ?? "1") !== "0";
/** Sluice with n serve processes, Kafka Streams with n stream threads, or the kafkajs floor. */
type Side = `sluice-${number}` | `kstreams-${number}` | "kafkajs";
const isSluice = (side: Side) => side.startsWith("sluice-");
const isPeer = (side: Side) => side.startsWith("kstreams-");
/** The n of a side: Sluice's processes or Kafka Streams' stream threads. */
const sideCount = (side: Side) => Number(side.slice(side.indexOf("-") + 1));
const sideLabel = (side: Side) =>
  side === "kafkajs"
    ? "kafkajs alone (floor)"
    : isSluice(side)
      ? `Sluice (${sideCount(side)} proc.)`
      : `Kafka Streams (${sideCount(side)} thr.)`;
const MODES = (process.env.BENCH_CEILING_MODES ?? "noop,logistic")
  .split(",")
  .map((s) => s.trim())
  .filter((s) => s !== "") as Mode[];
for (const m of MODES)
  if (m !== "noop" && m !== "logistic")
    throw new Error(`BENCH_CEILING_MODES: unknown ${m}; use noop, logistic`);

const ROOT = dirname(benchmarksFile());
const SLUICE = join(ROOT, "bin", "sluice.js");
/** BENCH_CEILING_NODE_ARGS: node flags for serve, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof". */
const NODE_ARGS = (process.env.BENCH_CEILING_NODE_ARGS ?? "").split(" ").filter(Boolean);
const NOOP_HOOK = pathToFileURL(join(ROOT, "dist", "bench", "noop-serve.js")).href;
const FLOOR_SCRIPT = join(ROOT, "dist", "bench", "kafkajs-floor.js");
const PEER_POM = join(ROOT, "bench", "kafka-streams", "pom.xml");
const PEER_TARGET = join(ROOT, "bench", "kafka-streams", "target");
const PEER_PACKAGE = "dev.sluice.bench.kstreams";
const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};
const runTag = Date.now().toString(36);

/** The peer's classpath: its compiled classes and its Maven dependencies (offline first, then Central). */
function buildPeer(): string {
  const goals = ["-B", "-q", "-f", PEER_POM, "compile", "dependency:build-classpath"];
  for (const args of [["-o", ...goals], goals]) {
    log(`building the Kafka Streams peer: mvn ${args.join(" ")}`);
    const r = spawnSync("mvn", args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    if (r.status === 0) {
      const deps = readFileSync(join(PEER_TARGET, "classpath.txt"), "utf8").trim();
      return [join(PEER_TARGET, "classes"), deps].join(":");
    }
    log(`mvn failed (${r.status}): ${(r.stdout + r.stderr).trim().split("\n").slice(-3).join(" | ")}`);
  }
  throw new Error(
    "cannot build bench/kafka-streams (needs Java 17+ and Maven; Maven Central the first time)",
  );
}

/**
 * Waits, at most QUIET_WAIT_MS, for 3 s in which the machine, the broker aside, is busy less than
 * QUIET_CORES: on a shared machine a neighbour's burst (a test run, a type check) stretches the wall
 * time of whatever runs beside it. Returns whether it found them; a run can still meet a neighbour.
 */
async function quietMachine(brokerPid: number | undefined): Promise<boolean> {
  const broker = () => (brokerPid === undefined ? 0 : (procTicks(brokerPid) ?? 0));
  const until = Date.now() + QUIET_WAIT_MS;
  for (;;) {
    const m0 = machineBusy();
    const b0 = broker();
    await new Promise<void>((r) => setTimeout(r, 3000));
    const cores = (machineBusy() - m0 - (broker() - b0)) / CLK_TCK / 3;
    if (cores < QUIET_CORES) return true;
    if (Date.now() > until) return false;
  }
}

/** A child process with its stderr (and stdout, unless `onLine` takes its lines) in a log file. */
/**
 * The machine's speed at one moment: ms for a fixed piece of single-threaded work, the best of three:
 * a 10-million-step integer loop (the core), 3,000 JSON round trips of a 700-byte document
 * (allocation and young-generation GC, as a side's per-record work) and one read per cache line of
 * 64 MiB (memory and the shared cache, which a busy neighbour on the host takes first), 19–25 ms on
 * the Intel Xeon benchmark machine when idle, 22–44 ms on the AMD EPYC one. Taken just before the
 * backlog lands and just after the last result, so a run on a machine that was itself slower in those
 * shows as such in the report instead of as the side's result. It does not time the kernel's network
 * path: on the AMD EPYC machine every side ran at half its Intel rate with the calibration nearly
 * unchanged (BENCHMARKS.md, "Fetch responses in one pass").
 */
function calibrationMs(): number {
  sweep ??= new Float64Array(8 * 1024 * 1024).fill(1);
  const doc = JSON.stringify({
    id: "calibration",
    inputs: [{ name: "input", shape: [1, 4], datatype: "FP32", data: [5.1, 3.5, 1.4, 0.2] }],
    text: "lorem ipsum ".repeat(50),
  });
  let best = Number.POSITIVE_INFINITY;
  for (let attempt = 0; attempt < 3; attempt++) {
    const t0 = performance.now();
    let x = 1;
    for (let i = 0; i < 10_000_000; i++) x = (Math.imul(x, 1_103_515_245) + 12_345) | 0;
    for (let i = 0; i < 3000; i++) x += JSON.stringify(JSON.parse(doc)).length;
    for (let i = 0; i < sweep.length; i += 8) x += sweep[i] as number;
    best = Math.min(best, performance.now() - t0 + (x === 0.5 ? 1 : 0)); // x keeps the work alive
  }
  return best;
}
let sweep: Float64Array | undefined;

function start(
  command: string,
  args: string[],
  logPath: string,
  onLine?: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): ChildProcess {
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
  const out = createWriteStream(logPath);
  child.stderr?.pipe(out);
  if (onLine && child.stdout) createInterface({ input: child.stdout }).on("line", onLine);
  else child.stdout?.pipe(out);
  return child;
}

function exited(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  if (!(await exited(child, 30_000))) {
    child.kill("SIGKILL");
    await exited(child, 10_000);
  }
}

/** What the reader printed at the end of a run. */
interface CounterSummary {
  expected: number;
  distinct: number;
  missing: number;
  duplicates: number;
  unexpected: number;
  ok: number;
  firstMs: number;
  lastMs: number;
  valueBytes: number;
  headers: number;
  samples: Record<string, string>;
}

/** The Java read_committed counter of one results topic (ResultCounter.java). */
class ResultCounter {
  readonly child: ChildProcess;
  private readonly waiters = new Map<string, (line: Record<string, unknown>) => void>();
  private readonly seen = new Map<string, Record<string, unknown>>();
  constructor(classpath: string, brokers: string[], topic: string, prefix: string, logPath: string) {
    this.child = start(
      "java",
      [
        "-cp",
        classpath,
        `${PEER_PACKAGE}.ResultCounter`,
        ...["--bootstrap", brokers.join(","), "--topic", topic, "--prefix", prefix],
        ...["--expected", String(RECORDS), "--sample", String(SAMPLE)],
      ],
      logPath,
      (line) => {
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(line) as Record<string, unknown>;
        } catch {
          return;
        }
        const event = String(parsed.event);
        this.seen.set(event, parsed);
        this.waiters.get(event)?.(parsed);
      },
    );
  }
  /** The line of `event`, or undefined after `timeoutMs` or when the counter exits first. */
  wait(event: string, timeoutMs: number): Promise<Record<string, unknown> | undefined> {
    const seen = this.seen.get(event);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), timeoutMs);
      this.child.once("exit", () => resolve(this.seen.get(event)));
      this.waiters.set(event, (line) => {
        clearTimeout(timer);
        resolve(line);
      });
    });
  }
  async finish(): Promise<CounterSummary> {
    this.child.stdin?.end("stop\n");
    const summary = await this.wait("summary", 120_000);
    await stopProcess(this.child);
    if (!summary) throw new Error("the result counter printed no summary");
    return summary as unknown as CounterSummary;
  }
}

interface Run {
  mode: Mode;
  side: Side;
  round: number;
  rate: number;
  /** CPU-s of the process from its start to the last result, and within first → last result. */
  cpuTotal: number;
  cpuWindow: number;
  /** CPU-s in the window of the broker (when it runs here), of the reader, and of the rest of the machine. */
  brokerWindow: number;
  readerWindow: number;
  restWindow: number;
  windowS: number;
  /**
   * From the moment the backlog lands ("running") or the process's spawn ("cold") to the last result,
   * s: the whole drain ("cold": start-up and the group join too). The
   * window alone can flatter a side that takes in much of the backlog before its first result commits
   * (larger fetches do), so the report gives both.
   */
  spanS: number;
  summary: CounterSummary;
  /** Kafka Streams' own counts, or whether the serve log has the no-op line. */
  note: string;
  load: string;
  /** Whether the run started on a quiet machine (quietMachine). */
  quiet: boolean;
  /** calibrationMs() just before the backlog landed (or the spawn) and just after the last result. */
  calibration: { before: number; after: number };
  /** Which attempt this is (a crowded run is run again, see MAX_REST_CORES). */
  attempts?: number;
}

/** The rest of the machine's CPU in a run's window, in cores. */
const restCores = (r: Run) => r.restWindow / r.windowS;

/** What every run of one bench invocation shares. */
interface Bench {
  classpath: string;
  brokers: string[];
  brokerPid: number | undefined;
  dir: string;
  lr: { path: string; version: string };
  createTopics(names: string[]): Promise<void>;
  kafka: Kafka;
  admin: Admin;
  /** Each mode's backlog, the same records for every run. */
  backlogs: Partial<Record<Mode, BacklogRecord[]>>;
}

/** One request of a backlog as the producer takes it. */
interface BacklogRecord {
  key: string;
  value: Buffer;
  headers: Record<string, string>;
}

async function main(): Promise<void> {
  const startedAt = new Date();
  const load0 = loadavg();
  const classpath = buildPeer();
  const broker = await benchBroker();
  const kafka = new Kafka({ clientId: "ceiling-bench", brokers: broker.brokers, logLevel: logLevel.NOTHING });
  const dir = mkdtempSync(join(tmpdir(), "sluice-ceiling-"));
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer();
  await producer.connect();
  const runs: Run[] = [];
  let words: number[] = [];
  const created: string[] = [];
  try {
    const models = await createTinyTensorModels(dir);
    const bench: Bench = {
      classpath,
      brokers: broker.brokers,
      brokerPid: listenerPid(Number(broker.brokers[0]?.split(":").pop())),
      dir,
      lr: {
        path: models.lr,
        version: createHash("sha256").update(readFileSync(models.lr)).digest("hex").slice(0, 12),
      },
      kafka,
      admin,
      backlogs: {},
      createTopics: async (names) => {
        await admin.createTopics({
          waitForLeaders: true,
          topics: names.map((topic) => ({ topic, numPartitions: PARTITIONS })),
        });
        created.push(...names);
      },
    };
    log(`broker pid ${bench.brokerPid ?? "not found on this machine (its CPU is not read)"}`);
    // Placeholders for the no-op runs: serve checks that model.path and its tokenizer exist, the hook
    // hands it the no-op model instead of opening them.
    writeFileSync(join(dir, "noop.onnx"), "not a model: bench/noop-serve.ts replaces model loading\n");
    writeFileSync(join(dir, "tokenizer.json"), "{}\n");

    const texts = MODES.includes("noop") ? loadParagraphs(RECORDS, 7) : [];
    words = texts.map((t) => t.split(/\s+/).length).sort((a, b) => a - b);
    for (const mode of MODES) {
      const b = BACKLOG[mode];
      const records = Array.from({ length: RECORDS }, (_, i): BacklogRecord => {
        const key = `${b.prefix}${i}`;
        const r =
          mode === "noop"
            ? encodeRequest({ id: key, text: texts[i] as string }, "json")
            : encodeRequest(
                { id: key, text: "", tensors: { inputs: [irisInput(i)], outputs: null } },
                "v2-json",
              );
        return { key, ...r };
      });
      bench.backlogs[mode] = records;
      const bytes = records.reduce((a, r) => a + r.value.length, 0);
      // "running": every run writes its own copy (stageBacklog); "cold": one topic, written now.
      if (START === "cold") {
        await bench.createTopics([b.topic]);
        await produceBacklog(producer, b.topic, records);
      }
      log(`backlog of ${mode}: ${RECORDS} requests, ${(bytes / 1e6).toFixed(1)} MB of values`);
    }
    for (const [m, mode] of MODES.entries()) {
      const sides: Side[] = [
        ...SLUICE_PROCESSES.map((n): Side => `sluice-${n}`),
        ...KSTREAMS_THREADS.map((n): Side => `kstreams-${n}`),
        ...(FLOOR ? (["kafkajs"] as const) : []),
      ];
      // Round 0 warms a freshly started broker up (its JIT, the transaction paths); it is not reported.
      for (let round = m === 0 && WARMUP ? 0 : 1; round <= ROUNDS; round++) {
        for (const side of round % 2 === 1 ? sides : [...sides].reverse()) {
          // A run a neighbour crowded (rest of the machine busier than MAX_REST_CORES) is run again, up
          // to ATTEMPTS times; the attempt with the least crowding is kept, whatever its rate.
          let kept: Run | undefined;
          for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
            const run = { ...(await runOnce(bench, mode, side, round, attempt)), attempts: attempt };
            log(
              `${mode} round ${round}${attempt > 1 ? ` attempt ${attempt}` : ""}: ${sideLabel(side)} ${run.rate.toFixed(0)} results/s, ${run.cpuTotal.toFixed(2)} CPU-s (${run.cpuWindow.toFixed(2)} in the ${run.windowS.toFixed(1)} s window; broker ${run.brokerWindow.toFixed(2)}, reader ${run.readerWindow.toFixed(2)}, rest ${run.restWindow.toFixed(2)} = ${restCores(run).toFixed(2)} cores; calibration ${run.calibration.before.toFixed(0)} / ${run.calibration.after.toFixed(0)} ms), ` +
                `${run.summary.distinct}/${RECORDS} ids, ${run.summary.duplicates} duplicates, ${run.summary.ok} ok; ${run.note}`,
            );
            if (!kept || restCores(run) < restCores(kept)) kept = run;
            if (restCores(run) <= MAX_REST_CORES) break;
          }
          if (round > 0 && kept) runs.push(kept);
        }
      }
    }
  } finally {
    await producer.disconnect().catch(() => undefined);
    // Everything this run made, Kafka Streams' changelogs included, once nothing is measured any more.
    const mine = (await admin.listTopics().catch(() => [] as string[])).filter((t) =>
      t.startsWith(`ceiling-${runTag}`),
    );
    await admin.deleteTopics({ topics: [...new Set([...created, ...mine])] }).catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const markdown = report(runs, { startedAt, load0, brokerNote: broker.note, words, java: javaVersion() });
  if (OUTPUT === "-") process.stdout.write(`${markdown}\n`);
  else await writeBenchmarkSection("ceiling", markdown, OUTPUT || undefined);
}

/** The two backlogs: ids `<prefix><i>`. */
const BACKLOG: Record<Mode, { topic: string; prefix: string }> = {
  noop: { topic: `ceiling-${runTag}.requests`, prefix: "c-" },
  logistic: { topic: `ceiling-${runTag}.tensor-requests`, prefix: "t-" },
};

/** One side over the whole backlog of `mode`: start it, wait for every result, stop it, read the counters. */
async function runOnce(bench: Bench, mode: Mode, side: Side, round: number, attempt: number): Promise<Run> {
  const b = BACKLOG[mode];
  // Every attempt its own topics, group and application id: each reads the whole backlog again.
  const base = `ceiling-${runTag}-${mode}-${side}-${round}-${attempt}`;
  const results = `${base}.results`;
  await bench.createTopics([results]);
  const requests = START === "running" ? `${base}.requests` : b.topic;
  const staged =
    START === "running" ? await stageBacklog(bench, requests, bench.backlogs[mode] ?? []) : undefined;
  const quiet = await quietMachine(bench.brokerPid);
  const counter = new ResultCounter(
    bench.classpath,
    bench.brokers,
    results,
    b.prefix,
    join(bench.dir, `${base}.counter.log`),
  );
  if (!(await counter.wait("ready", 120_000))) throw new Error(`counter for ${results} not ready`);
  const load = loadavg()
    .map((x) => x.toFixed(1))
    .join(" / ");
  const logPath = join(bench.dir, `${base}.log`);
  let peerLine: Record<string, unknown> | undefined;
  let children: ChildProcess[];
  const logPaths = isSluice(side)
    ? Array.from({ length: sideCount(side) }, (_, i) => join(bench.dir, `${base}.${i}.log`))
    : [logPath];
  // "cold": the machine's speed before the spawn; "running": just before the landing (below).
  let calibrationBefore = staged ? 0 : calibrationMs();
  const spawnedMs = Date.now();
  if (isSluice(side)) {
    const config = join(bench.dir, `${base}.yaml`);
    writeFileSync(config, serveConfig(mode, base, requests, results, bench));
    const hook = mode === "noop" ? ["--import", NOOP_HOOK] : [];
    // npm_command would make bin/sluice.js watch its parent; this bench is its parent either way.
    const { npm_command: _npm, ...env } = process.env;
    // Every process the same configuration: members of one consumer group, as replicas run.
    children = logPaths.map((path) =>
      start(
        process.execPath,
        [...NODE_ARGS, ...hook, SLUICE, "--config", config, "serve"],
        path,
        undefined,
        env,
      ),
    );
  } else if (side === "kafkajs") {
    children = [
      start(
        process.execPath,
        [...NODE_ARGS, FLOOR_SCRIPT, bench.brokers.join(","), requests, results, base, mode],
        logPath,
      ),
    ];
  } else {
    children = [
      start(
        "java",
        [
          "-cp",
          bench.classpath,
          `${PEER_PACKAGE}.CeilingPeer`,
          ...["--bootstrap", bench.brokers.join(","), "--requests", requests, "--results", results],
          ...["--application-id", base, "--mode", mode, "--records", String(RECORDS)],
          ...["--threads", side.slice("kstreams-".length), "--state-dir", join(bench.dir, `${base}.state`)],
          ...(mode === "logistic"
            ? ["--weights", LR_W.join(","), "--bias", String(LR_B), "--model-version", bench.lr.version]
            : []),
        ],
        logPath,
        (line) => {
          try {
            peerLine = JSON.parse(line) as Record<string, unknown>;
          } catch {
            // not the counts line
          }
        },
      ),
    ];
  }
  const procs = children.map((_, i) => `proc${i}`);
  const cpu = new CpuSampler({
    ...Object.fromEntries(children.map((c, i) => [`proc${i}`, c.pid])),
    reader: counter.child.pid,
    broker: bench.brokerPid,
  });
  const sum = (f: (name: string) => number) => procs.reduce((a, n) => a + f(n), 0);
  // "running": the backlog lands once every member has joined and had a moment to restore and fetch.
  let startedMs = spawnedMs;
  if (staged) {
    try {
      await groupFormed(bench.admin, base, side === "kafkajs" ? 1 : sideCount(side), 120_000);
    } catch (error) {
      // No run without its group: stop what was started (the open transaction times out on its own).
      await Promise.all([...children, counter.child].map((c) => stopProcess(c)));
      cpu.stop();
      throw error;
    }
    await new Promise<void>((r) => setTimeout(r, SETTLE_MS));
  }
  if (staged) {
    calibrationBefore = calibrationMs();
    startedMs = Date.now();
    await staged.release();
  }
  const complete = await Promise.race([
    counter.wait("complete", TIMEOUT_MS),
    Promise.race(children.map((c) => exited(c, TIMEOUT_MS))).then(async () =>
      counter.wait("complete", 5_000),
    ),
  ]);
  cpu.sample();
  const calibrationAfter = calibrationMs();
  // Kafka Streams stops by itself after the last record (closing commits it); serve on SIGTERM.
  for (const child of children) if (!isPeer(side) || !(await exited(child, 90_000))) await stopProcess(child);
  cpu.stop();
  const summary = await counter.finish();
  if (staged) await bench.admin.deleteTopics({ topics: [requests] }).catch(() => undefined);
  if (!complete) log(`${mode} round ${round}: ${side} did not deliver all ${RECORDS} results in time`);
  const { firstMs: from, lastMs: to } = summary;
  const windowS = Math.max(0.001, (to - from) / 1000);
  const proc = sum((n) => cpu.between(n, from, to));
  const [reader, broker] = ["reader", "broker"].map((n) => cpu.between(n, from, to)) as number[];
  return {
    mode,
    side,
    round,
    rate: summary.distinct > 1 ? (summary.distinct - 1) / windowS : 0,
    cpuTotal: sum((n) => cpu.at(n, to)),
    cpuWindow: proc,
    brokerWindow: broker as number,
    readerWindow: reader as number,
    restWindow: cpu.between("machine", from, to) - proc - (reader as number) - ((broker as number) || 0),
    windowS,
    spanS: Math.max(0.001, (to - startedMs) / 1000),
    summary,
    note: isPeer(side)
      ? JSON.stringify(peerLine ?? {})
      : side === "kafkajs"
        ? "kafkajs floor"
        : mode === "noop" && logPaths.some((p) => !readFileSync(p, "utf8").includes(NOOP_SERVE_LINE))
          ? "NO no-op line in a serve log"
          : "serve",
    load,
    quiet,
    calibration: { before: calibrationBefore, after: calibrationAfter },
  };
}

function javaVersion(): string {
  const r = spawnSync("java", ["-version"], { encoding: "utf8" });
  const line = `${r.stderr}`.split("\n")[0]?.trim() ?? "";
  return line.replace(/^openjdk version "([^"]+)".*/, "OpenJDK $1") || "java";
}

/** The iris-shaped features of request i (the tensor bench's), one row, flat. */
function irisInput(i: number) {
  return { name: "predict", shape: [1, 4], datatype: "FP32" as const, data: irisRow(i) };
}
function irisRow(i: number): number[] {
  return [i % 7, 3.5, (i % 5) + 0.5, i % 3];
}

async function produceBacklog(
  producer: Pick<Producer, "send">,
  topic: string,
  records: BacklogRecord[],
): Promise<void> {
  for (let i = 0; i < records.length; i += 1000)
    await producer.send({ topic, messages: records.slice(i, i + 1000) });
}

/**
 * The backlog of one "running" run: written to its own topic in one transaction left open, so no
 * read_committed consumer sees a record of it until `release` commits it (the whole backlog becomes
 * readable at once). Sluice, Kafka Streams under EOS and the kafkajs floor all read read_committed.
 */
async function stageBacklog(
  bench: Bench,
  topic: string,
  records: BacklogRecord[],
): Promise<{ release(): Promise<void> }> {
  await bench.createTopics([topic]);
  const producer = bench.kafka.producer({
    transactionalId: `${topic}.stager`,
    idempotent: true,
    maxInFlightRequests: 1,
    // The side's start and its group's join happen while it is open: well within 5 minutes.
    transactionTimeout: 300_000,
  });
  await producer.connect();
  const txn = await producer.transaction();
  try {
    await produceBacklog(txn, topic, records);
  } catch (error) {
    await txn.abort().catch(() => undefined);
    await producer.disconnect();
    throw error;
  }
  return {
    release: async () => {
      await txn.commit();
      await producer.disconnect();
    },
  };
}

/**
 * Waits until `group` is Stable with `members` members, each with an assignment (at most
 * `timeoutMs`): the side's processes, or Kafka Streams' stream threads, have all joined.
 */
async function groupFormed(admin: Admin, group: string, members: number, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const { groups } = await admin.describeGroups([group]);
    const g = groups[0];
    if (
      g?.state === "Stable" &&
      g.members.length === members &&
      g.members.every((m) => m.memberAssignment.length > 0)
    )
      return;
    if (Date.now() > until)
      throw new Error(
        `group ${group} not formed in ${timeoutMs} ms: ${g?.state ?? "absent"}, ${g?.members.length ?? 0} of ${members} members`,
      );
    await new Promise<void>((r) => setTimeout(r, 100));
  }
}

/** `sluice serve`'s configuration for one run: defaults but for the topics, the group and the model. */
function serveConfig(mode: Mode, base: string, requests: string, results: string, bench: Bench): string {
  const model =
    mode === "noop"
      ? ["  name: noop", `  path: ${JSON.stringify(join(bench.dir, "noop.onnx"))}`]
      : ["  name: logistic-regression", "  task: tensor", `  path: ${JSON.stringify(bench.lr.path)}`];
  const codec = mode === "noop" ? "json" : "v2-json";
  return [
    "kafka:",
    `  brokers: [${bench.brokers.map((b) => JSON.stringify(b)).join(", ")}]`,
    "topics:",
    `  requests: [${requests}]`,
    `  results: ${results}`,
    `  deadLetters: ${base}.dlq`,
    `  dedupChangelog: ${base}.dedup`,
    `  freshness: ${base}.freshness`,
    `  requestCodec: ${codec}`,
    `  resultCodec: ${codec}`,
    `  partitions: ${PARTITIONS}`,
    "consumer:",
    `  groupId: ${base}`,
    "delivery:",
    // The backlog is older than the 30 s default deadline by the later runs; no request may expire.
    "  defaultTimeoutMs: 86400000",
    "model:",
    ...model,
    "observability:",
    "  metricsPort: 0",
    "",
  ].join("\n");
}

/** Field paths of a JSON value (`a.b`, arrays as one path), to compare the two sides' result shapes. */
function fieldPaths(value: unknown, prefix = ""): string[] {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return [prefix];
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) =>
    fieldPaths(v, prefix ? `${prefix}.${k}` : k),
  );
}

/** What a sampled result says: its field paths and its answer (the embedding, or the probability). */
function answerOf(mode: Mode, value: string): { paths: string[]; answer: number[] } {
  const parsed = JSON.parse(value) as Record<string, unknown>;
  const answer =
    mode === "noop"
      ? ((parsed.output as { embedding?: number[] } | null)?.embedding ?? [])
      : ((parsed.outputs as { data: number[] }[] | undefined)?.[0]?.data ?? []);
  return { paths: fieldPaths(parsed), answer };
}

/** The checks of one mode over the sampled results of every run: same shape, same answers. */
function sampleChecks(mode: Mode, runs: Run[]): string {
  const sluice = runs.filter((r) => isSluice(r.side));
  const peer = runs.filter((r) => isPeer(r.side));
  const first = (rs: Run[]) => {
    const v = Object.values(rs[0]?.summary.samples ?? {})[0];
    return v === undefined ? undefined : answerOf(mode, v);
  };
  const s = first(sluice);
  const k = first(peer);
  const shape =
    s && k
      ? s.paths.join() === k.paths.join()
        ? `the same ${s.paths.length} fields in the same order`
        : `different fields: Sluice ${s.paths.join(", ")}; Kafka Streams ${k.paths.join(", ")}`
      : "no sample to compare";
  let worstDelta = 0;
  let compared = 0;
  for (const run of runs) {
    for (const [id, value] of Object.entries(run.summary.samples)) {
      const answer = answerOf(mode, value).answer;
      const i = Number(id.slice(id.indexOf("-") + 1));
      const expected = mode === "noop" ? new Array<number>(384).fill(0) : [lrReference(irisRow(i))];
      const delta =
        answer.length === expected.length
          ? Math.max(...answer.map((a, j) => Math.abs(a - (expected[j] as number))))
          : Number.POSITIVE_INFINITY;
      worstDelta = Math.max(worstDelta, delta);
      compared++;
    }
  }
  const answers =
    mode === "noop"
      ? worstDelta === 0
        ? "every sampled result is an `ok` embedding of 384 zeros"
        : "NOT every sampled result is an embedding of 384 zeros"
      : `every sampled probability is within ${worstDelta.toExponential(1)} of sigmoid(x · w + b) computed in double precision`;
  const bytes = (rs: Run[]) => {
    const n = Math.max(
      1,
      rs.reduce((a, r) => a + r.summary.distinct, 0),
    );
    const v = rs.reduce((a, r) => a + r.summary.valueBytes, 0) / n;
    const h = rs.reduce((a, r) => a + r.summary.headers, 0) / n;
    return `${v.toFixed(0)} B (${h.toFixed(0)} header${h === 1 ? "" : "s"})`;
  };
  return `Result shape: ${shape}; mean value per result Sluice ${bytes(sluice)}, Kafka Streams ${bytes(peer)}. Answers (ids below ${SAMPLE} of every run, ${compared} results): ${answers}.`;
}

function exactlyOnce(r: Run): string {
  const s = r.summary;
  const good = s.missing === 0 && s.duplicates === 0 && s.unexpected === 0 && s.ok === s.expected;
  return good
    ? `yes (${s.distinct}/${s.expected})`
    : `NO: ${s.distinct}/${s.expected} ids, ${s.missing} missing, ${s.duplicates} duplicated, ${s.unexpected} unexpected, ${s.ok} ok`;
}

/** One Sluice variant ÷ one Kafka Streams variant, round by round: rates, and CPU per result the other way round. */
function ratioLine(rs: Run[], sluice: Side, side: Side): string {
  const f2 = (x: number) => x.toFixed(2);
  const rounds = [...new Set(rs.map((r) => r.round))];
  const pairs = rounds.map((round) => ({
    round,
    s: rs.find((r) => r.round === round && r.side === sluice),
    k: rs.find((r) => r.round === round && r.side === side),
  }));
  const rate = pairs.map(({ s, k }) => (s && k ? s.rate / k.rate : Number.NaN));
  const cpu = pairs.map(({ s, k }) =>
    s && k ? k.cpuWindow / k.summary.distinct / (s.cpuWindow / s.summary.distinct) : Number.NaN,
  );
  const worst = Math.min(...rate);
  const span = pairs.map(({ s, k }) => (s && k ? k.spanS / s.spanS : Number.NaN));
  return (
    `${sideLabel(sluice)} ÷ ${sideLabel(side)}, results/s, per round: ${rate.map((x) => `×${f2(x)}`).join(", ")}; **median ×${f2(median(rate))}**, worst round ${rounds[rate.indexOf(worst)]} (×${f2(worst)}). ` +
    `Its CPU per result ÷ Sluice's (in the window): ${cpu.map((x) => `×${f2(x)}`).join(", ")}; median ×${f2(median(cpu))}. ` +
    `Its time from ${SPAN_FROM} to the last result ÷ Sluice's: ${span.map((x) => `×${f2(x)}`).join(", ")}; median ×${f2(median(span))}.`
  );
}

/**
 * What the ×2 goal asks of Sluice next to what kafkajs alone does in the same run: twice each Kafka
 * Streams variant's median rate against the floor's median, and what the goal's rate is of the floor's.
 */
function goalAgainstFloor(rs: Run[]): string[] {
  const rates = (side: Side) => rs.filter((r) => r.side === side).map((r) => r.rate);
  const floor = rates("kafkajs");
  if (floor.length === 0) return [];
  const floorMedian = median(floor);
  return KSTREAMS_THREADS.map((n): Side => `kstreams-${n}`)
    .filter((side) => rates(side).length > 0)
    .map((side) => {
      const goal = 2 * median(rates(side));
      return `×2 ${sideLabel(side)}'s median = ${goal.toFixed(0)} results/s; kafkajs alone's median in this run ${floorMedian.toFixed(0)} (rounds ${floor.map((x) => x.toFixed(0)).join(", ")}): the goal is ${((100 * goal) / floorMedian).toFixed(0)} % of the floor's rate.`;
    });
}

function report(
  runs: Run[],
  c: { startedAt: Date; load0: number[]; brokerNote: string; words: number[]; java: string },
): string {
  const f1 = (x: number) => x.toFixed(1);
  const f2 = (x: number) => x.toFixed(2);
  const threads = KSTREAMS_THREADS.join(" and ");
  const calibrations = runs.flatMap((r) => [r.calibration.before, r.calibration.after]);
  const lines: string[] = [
    "## Kafka-path ceiling against Kafka Streams (`npm run bench:ceiling`)",
    "",
    `Run ${c.startedAt.toISOString()} on ${machineDescription()} at the end (${c.load0.map(f1).join(" / ")} at the start); broker: ${c.brokerNote}.`,
    `One backlog per mode, the same records in every run: ${RECORDS} requests over ${PARTITIONS} partitions, keyed by id (text: corpus paragraphs of ${percentile(c.words, 50)} / ${percentile(c.words, 90)} / ${percentile(c.words, 99)} words at p50 / p90 / p99; tensor: one-row iris V2 requests). Every run reads the whole backlog from its start with a fresh consumer group / application id and fresh output topics; ${START === "running" ? `the backlog lands on a side already running, as on a deployment's replicas: each run gets its own copy, written in one open transaction, which is committed (the whole backlog readable at once to read_committed readers) when the side's group is Stable with every process / stream thread a member with an assignment, plus ${SETTLE_MS / 1000} s` : "the side starts on a backlog already there (produced once, before the runs): a start into a waiting backlog, and with several processes a member joining while the first drains"}; within a round the sides take turns (Sluice first in odd rounds, last in even ones)${WARMUP ? ", after one unreported warm-up round of every side on the broker" : ""}. Every process starts cold (a fresh JVM, a fresh Node.js).`,
    `**Sluice**: \`node bin/sluice.js serve\`, each its own process, ${SLUICE_PROCESSES.join(" or ")} of them with the same configuration (separate runs; members of one consumer group, as replicas run; their CPU is summed), defaults (transactions on, \`delivery.commitIntervalMs\` 100, \`model.workers\` auto) but for the topics, the group, \`delivery.defaultTimeoutMs\` (a day, so no backlog request expires) and the model: the no-op model (src/model/noop-model.ts, handed to serve by bench/noop-serve.ts) with JSON in and out, or the logistic regression (\`model.task: tensor\`) with V2 JSON in and out. ` +
      `**Kafka Streams** 3.9.1 (bench/kafka-streams/, ${c.java}, JVM defaults): \`processing.guarantee=exactly_once_v2\`, default \`commit.interval.ms\` (100 under EOS), \`num.stream.threads\` ${threads} (separate runs), a logged in-memory dedup store keyed by request id, one result per record in Sluice's shape (a zero embedding of 384 floats, or the same logistic regression in float32).` +
      (FLOOR
        ? " **kafkajs alone (floor)** (bench/kafkajs-floor.ts, its own Node.js process): kafkajs with Sluice's produce encoding, per record only a JSON parse for the id (and in the logistic mode the regression in float32 on the request's row), one result of Sluice's shape and size from a template built once and one changelog entry, in one transaction per fetched batch with its offset, a transactional producer per input partition: what kafkajs itself costs on this path, with none of Sluice's work (no validation, deadlines, micro-batches, model runtime, metrics or logs)."
        : ""),
    `Rate = results from the first to the last one a read_committed reader (the Java client, its own process) sees; ${SPAN_FROM} → last result = from ${START === "running" ? "the commit that lands the backlog" : "the side's process spawn (start-up, group join and the whole drain)"} to that last result (a side that takes in much of the backlog before its first result commits looks faster in the window than it is). CPU = utime + stime from /proc: the process from its start (start-up included) and within that window; the broker's and the reader's in the window; rest = the machine's other busy CPU in the window (the bench itself and whatever else runs on the machine; each run starts after 3 s with less than ${QUIET_CORES} of a core busy besides the broker, waiting at most ${QUIET_WAIT_MS / 1000} s, else it is marked "not quiet"; a run during which the rest averaged more than ${MAX_REST_CORES} cores is run again, at most ${ATTEMPTS} attempts, and the least crowded attempt is the one shown, its number in "attempt"). Exactly once = every request id exactly once among the committed results, all \`ok\`. Calibration = the machine's own speed at the run: ms for a fixed piece of single-threaded work in the bench's process (an integer loop, JSON round trips, a pass over 64 MiB; best of 3) ${START === "running" ? "just before the landing" : "just before the spawn"} and just after the last result${calibrations.length ? `; the fastest of this bench ${Math.min(...calibrations).toFixed(0)} ms, the slowest ${Math.max(...calibrations).toFixed(0)} ms` : ""} (a machine slowed in its cores, its allocator or its memory shows there, whatever the side; a slower kernel network path, which the broker and every side share, does not).`,
  ];
  for (const mode of MODES) {
    const rs = runs.filter((r) => r.mode === mode);
    if (rs.length === 0) continue;
    lines.push(
      "",
      `### ${mode === "noop" ? "No-op model: the Kafka path alone (text requests, JSON results)" : "Logistic regression (V2 JSON tensor requests and results)"}`,
      "",
      `| round | side | results/s | CPU-s from start | CPU-s in window | CPU-ms / 1k results | broker CPU-s | reader CPU-s | rest CPU-s (cores) | window s | ${SPAN_FROM} → last result s | attempt | exactly once | load (1 min) at start | calibration ms before / after |`,
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
      ...rs.map(
        (r) =>
          `| ${r.round} | ${sideLabel(r.side)}${r.quiet ? "" : " (not quiet)"} | ${r.rate.toFixed(0)} | ${f2(r.cpuTotal)} | ${f2(r.cpuWindow)} | ${((r.cpuWindow * 1e6) / Math.max(1, r.summary.distinct)).toFixed(0)} | ${f2(r.brokerWindow)} | ${f2(r.readerWindow)} | ${f2(r.restWindow)} (${f2(restCores(r))}) | ${f2(r.windowS)} | ${f2(r.spanS)} | ${r.attempts ?? 1} | ${exactlyOnce(r)} | ${r.load.split(" / ")[0]} | ${r.calibration.before.toFixed(0)} / ${r.calibration.after.toFixed(0)} |`,
      ),
      "",
      ...SLUICE_PROCESSES.flatMap((p) =>
        [
          ...KSTREAMS_THREADS.map((n): Side => `kstreams-${n}`),
          ...(rs.some((r) => r.side === "kafkajs") ? (["kafkajs"] as const) : []),
        ].map((other) => `- ${ratioLine(rs, `sluice-${p}`, other)}`),
      ),
      ...goalAgainstFloor(rs).map((line) => `- ${line}`),
      "",
      sampleChecks(mode, rs),
    );
  }
  return lines.join("\n");
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
