/**
 * What the serve benchmarks share (bench/slo-bench.ts, bench/upgrade-bench.ts): `sluice serve` as
 * separate processes, open-loop sends of paragraphs, a read_committed result reader with the parts of
 * each online result's latency, percentiles, `backfill submit`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Kafka, Producer } from "kafkajs";
import { encodeRequest } from "../src/contracts/request-codec.js";
import { percentile } from "./report.js";

/** The repository root, from bench/ (tsx) or dist/bench/ (built). */
export const ROOT = (() => {
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
export const SLUICE = join(ROOT, "bin", "sluice.js");
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);
export const runTag = Date.now().toString(36);
/** A number from the environment, else `fallback`. */
export const envNumber = (name: string, fallback: number) => Number(process.env[name] ?? fallback);

/** The request topic (LogAppendTime: latency starts at the broker) and the backfill topic of `base`. */
export async function createBenchTopics(
  admin: ReturnType<Kafka["admin"]>,
  base: string,
  partitions: number,
): Promise<void> {
  await admin.createTopics({
    waitForLeaders: true,
    topics: [
      {
        topic: `${base}.requests`,
        numPartitions: partitions,
        configEntries: [{ name: "message.timestamp.type", value: "LogAppendTime" }],
      },
      { topic: `${base}.backfill`, numPartitions: partitions },
    ],
  });
}

/**
 * The config file of a bench group `base`: its topics (`<base>.requests`, `.backfill`, `.results`,
 * `.bresults`, …), its group, and `extra` YAML lines (other sections).
 */
export function benchConfigYaml(brokers: string[], base: string, extra: string[] = []): string {
  return [
    "kafka:",
    `  brokers: [${brokers.map((b) => JSON.stringify(b)).join(", ")}]`,
    "topics:",
    `  requests: [${base}.requests]`,
    `  backfill: [${base}.backfill]`,
    `  results: ${base}.results`,
    `  backfillResults: ${base}.bresults`,
    `  deadLetters: ${base}.dlq`,
    `  dedupChangelog: ${base}.dedup`,
    `  runs: ${base}.runs`,
    `  modelControl: ${base}.control`,
    "consumer:",
    `  groupId: ${base}`,
    ...extra,
    "",
  ].join("\n");
}

/** Runs `sluice --config CONFIG ARGS…` (built dist/); resolves with its stdout and how long it took, s. */
export function runSluice(configPath: string, args: string[]): Promise<{ stdout: string; seconds: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SLUICE, "--config", configPath, ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout?.on("data", (d) => {
      out += d;
    });
    child.stderr?.on("data", (d) => {
      err += d;
    });
    child.once("exit", (code) =>
      code === 0
        ? resolve({ stdout: out, seconds: (performance.now() - started) / 1000 })
        : reject(new Error(`sluice ${args.join(" ")} exited ${code}: ${err.slice(-800)}`)),
    );
  });
}

/** One result as the reader saw it: arrival (epoch ms), broker append time, the result's own timing. */
export interface Arrival {
  arrivedMs: number;
  /** The result's status (ok, expired, fallback, …); "" for a result that was only counted. */
  status: string;
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
export class ResultReader {
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
  status: "",
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
  let status = "";
  try {
    const result = JSON.parse(value.toString());
    t = result.timing ?? {};
    status = String(result.status ?? "");
  } catch {
    // not a JSON result
  }
  const appendedMs = Number(t.requestTimestamp);
  const queueMs = Number(t.queueMs);
  const inferenceMs = Number(t.inferenceMs);
  const completedAt = Number(t.completedAt);
  return {
    arrivedMs: at,
    status,
    appendedMs,
    count: 1,
    intakeMs: completedAt - appendedMs - queueMs - inferenceMs,
    queueMs,
    inferenceMs,
    commitMs: at - completedAt,
  };
}

/**
 * Open-loop constant-rate sends of paragraphs until `stop()` says so or `maxSeconds` pass. With
 * `deadlineAfterMs`, each request's `deadlineMs` is that long after its scheduled send time.
 */
export async function sendOpenLoop(o: {
  producer: Producer;
  topic: string;
  rate: number;
  prefix: string;
  texts: string[];
  maxSeconds: number;
  stop?: () => boolean;
  deadlineAfterMs?: number;
}): Promise<number> {
  const t0 = performance.now();
  const t0Epoch = Date.now();
  let next = 0;
  const sends: Promise<unknown>[] = [];
  while ((performance.now() - t0) / 1000 < o.maxSeconds && !(o.stop?.() ?? false)) {
    const due: { key: string; value: Buffer; headers: Record<string, string> }[] = [];
    const elapsed = performance.now() - t0;
    while ((next * 1000) / o.rate <= elapsed) {
      const id = `${o.prefix}${next}`;
      const text = o.texts[next % o.texts.length] as string;
      const deadlineMs =
        o.deadlineAfterMs === undefined
          ? undefined
          : Math.round(t0Epoch + (next * 1000) / o.rate + o.deadlineAfterMs);
      due.push({
        key: id,
        ...encodeRequest(deadlineMs === undefined ? { id, text } : { id, text, deadlineMs }, "json"),
      });
      next++;
    }
    if (due.length > 0) sends.push(o.producer.send({ topic: o.topic, messages: due }));
    await sleep(Math.max(1, (next * 1000) / o.rate - (performance.now() - t0)));
  }
  await Promise.all(sends);
  return next;
}

export function p99(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return percentile(sorted, 99);
}
export function p50(values: number[]): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return percentile(sorted, 50);
}
export const median = (xs: number[]) => p50(xs);

/** Rows per second between the 10 % and the 90 % arrival. */
export function rate(arrivals: number[]): number {
  const sorted = [...arrivals].sort((a, b) => a - b);
  if (sorted.length < 10) return Number.NaN;
  const lo = sorted[Math.floor(sorted.length * 0.1)] as number;
  const hi = sorted[Math.floor(sorted.length * 0.9)] as number;
  return hi > lo
    ? ((Math.floor(sorted.length * 0.9) - Math.floor(sorted.length * 0.1)) * 1000) / (hi - lo)
    : Number.NaN;
}

export interface Serving {
  procs: ChildProcess[];
  logs: string[];
  ports: number[];
}

export async function startServing(
  configPath: string,
  n: number,
  guard: boolean,
  dir: string,
): Promise<Serving> {
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

export async function stopServing(s: Serving): Promise<void> {
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

export async function submit(
  configPath: string,
  file: string,
  runId: string,
  extra: string[] = [],
): Promise<void> {
  await runSluice(configPath, ["backfill", "submit", "--input", file, "--run-id", runId, ...extra]);
}

/** The reader of a bench group's online results (timed) and backfill results (counted), started. */
export async function benchReader(kafka: Kafka, base: string): Promise<ResultReader> {
  const reader = new ResultReader(kafka, [
    { topic: `${base}.results`, timing: true },
    { topic: `${base}.bresults`, timing: false },
  ]);
  await reader.start();
  return reader;
}

/** Warm-up: the model, the producers' transactions and the reader's fetch loop (3 s at 5 requests/s). */
export async function warmUp(producer: Producer, base: string, texts: string[]): Promise<void> {
  await sendOpenLoop({ producer, topic: `${base}.requests`, rate: 5, prefix: "warm-", texts, maxSeconds: 3 });
}
