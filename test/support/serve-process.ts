import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import type { IHeaders, Kafka, KafkaMessage } from "kafkajs";
import type { InferenceResult } from "../../src/contracts/inference.js";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { DEDUP_SEGMENT_KEY_PREFIX, decodeDedupSegment } from "../../src/delivery/dedup-segment.js";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { builtCli } from "./built-cli.js";
import { testKafka, uniqueName } from "./kafka-harness.js";

/**
 * Test helpers for the streaming processor: start `sluice serve` as a child process (the built CLI,
 * ./built-cli.ts), and read a topic the way a downstream `read_committed` consumer would.
 */
export interface ServeProcess {
  child: ChildProcess;
  /** Everything the process wrote to stdout+stderr so far (for failure messages). */
  output(): string;
  /** Resolves when a log line matching `pattern` appears (or when `pattern(output)` holds). */
  waitFor(pattern: RegExp | ((output: string) => boolean), timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (or signal) once the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const repoRoot = resolve(import.meta.dirname, "../..");

export function startServe(args: string[], env: Record<string, string> = {}): ServeProcess {
  return startLogged(process.execPath, [builtCli(), "serve", ...args], env);
}

/** Any command run from the repository root (e.g. `npx sluice serve`), watched like `startServe`. */
export function startLogged(command: string, args: string[], env: Record<string, string> = {}): ServeProcess {
  const child = spawn(command, args, {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const listeners: (() => void)[] = [];
  const onData = (d: Buffer) => {
    out += d.toString("utf8");
    for (const l of [...listeners]) l();
  };
  child.stdout?.on("data", onData);
  child.stderr?.on("data", onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) =>
    child.on("exit", (code, signal) => res({ code, signal })),
  );
  return {
    child,
    output: () => out,
    exited,
    waitFor(pattern, timeoutMs = 60_000) {
      const matches = typeof pattern === "function" ? pattern : (o: string) => pattern.test(o);
      return new Promise<void>((res, rej) => {
        const check = () => {
          if (matches(out)) {
            clearTimeout(timer);
            listeners.splice(listeners.indexOf(check), 1);
            res();
          }
        };
        const timer = setTimeout(() => {
          listeners.splice(listeners.indexOf(check), 1);
          rej(new Error(`timed out waiting for ${pattern} in serve output:\n${out.slice(-4000)}`));
        }, timeoutMs);
        listeners.push(check);
        void exited.then(() => {
          if (!matches(out)) {
            clearTimeout(timer);
            rej(new Error(`serve exited before ${pattern}:\n${out.slice(-4000)}`));
          }
        });
        check();
      });
    },
  };
}

export interface ReadRecord {
  partition: number;
  offset: string;
  key: string | null;
  value: Buffer | null;
  headers: IHeaders;
}

/**
 * Reads `topic` from the beginning as a downstream `read_committed` consumer would: until `expected`
 * records arrived, then on to the end offsets the broker reports at that moment (for read_committed
 * that is each partition's last stable offset), so whatever was committed by then is in the result,
 * duplicates included. It ends on those events, not on a quiet period; `timeoutMs` only bounds a read
 * whose records never come (the caller's count assertion then says what is missing).
 *
 * To prove that nothing more arrives (no duplicate), the end offsets must be read once the writers
 * are done: call it after they stopped (or after the group committed every input offset), or pass
 * `stopWriters`, which is awaited once `expected` records arrived, before the end offsets are read.
 */
export async function readCommitted(
  topic: string,
  opts: { expected: number; timeoutMs?: number; kafka?: Kafka; stopWriters?: () => Promise<unknown> },
): Promise<ReadRecord[]> {
  fixAbortedTransactionOrder(); // kafkajs would otherwise hand us aborted records (see that module)
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const kafka = opts.kafka ?? testKafka();
  const consumer = kafka.consumer({
    groupId: uniqueName("reader"),
    readUncommitted: false,
    maxWaitTimeInMs: 100,
  });
  const admin = kafka.admin();
  const records: ReadRecord[] = [];
  const seen = new Set<string>();
  // Per partition, the offset after the last one the reader has passed: aborted records and
  // transaction markers take offsets too, and kafkajs reports the batches made only of them through
  // END_BATCH_PROCESS as well (kafka/read/kafka-range-reader.ts relies on the same event).
  const passed = new Map<number, bigint>();
  consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
    const p = payload as { topic: string; partition: number; lastOffset?: string };
    if (p.topic !== topic || p.lastOffset === undefined) return;
    const next = BigInt(p.lastOffset) + 1n;
    if (next > (passed.get(p.partition) ?? 0n)) passed.set(p.partition, next);
  });
  const until = async (done: () => boolean) => {
    while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  };
  await Promise.all([consumer.connect(), admin.connect()]);
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }: { partition: number; message: KafkaMessage }) => {
        // A reader that rejoins its group (a session lost on a loaded machine) fetches again from its
        // last position: the same offset twice is the reader's re-read, not a record in the log twice.
        const at = `${partition}@${message.offset}`;
        if (seen.has(at)) return;
        seen.add(at);
        records.push({
          partition,
          offset: message.offset,
          key: message.key?.toString("utf8") ?? null,
          value: message.value,
          headers: message.headers ?? {},
        });
      },
    });
    await until(() => records.length >= opts.expected);
    await opts.stopWriters?.();
    const ends = await admin.fetchTopicOffsets(topic);
    await until(() => ends.every((e) => (passed.get(e.partition) ?? BigInt(e.low)) >= BigInt(e.high)));
  } finally {
    await Promise.all([consumer.disconnect(), admin.disconnect()]);
  }
  return records;
}

/** Environment that points `sluice serve` at a private set of topics and group. */
export function serveEnv(base: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    KAFKA_BROKERS: process.env.KAFKA_BROKERS ?? "",
    SLUICE_TOPICS__REQUESTS: `${base}.requests`,
    SLUICE_TOPICS__RESULTS: `${base}.results`,
    SLUICE_TOPICS__DEAD_LETTERS: `${base}.dlq`,
    SLUICE_TOPICS__DEDUP_CHANGELOG: `${base}.dedup`,
    SLUICE_TOPICS__FRESHNESS: `${base}.freshness`,
    SLUICE_CONSUMER__GROUP_ID: `${base}-group`,
    SLUICE_CONSUMER__SESSION_TIMEOUT_MS: "6000",
    SLUICE_CONSUMER__HEARTBEAT_INTERVAL_MS: "1000",
    SLUICE_OBSERVABILITY__METRICS_PORT: "0",
    SLUICE_OBSERVABILITY__LOG_LEVEL: "info",
    KAFKAJS_NO_PARTITIONER_WARNING: "1",
    ...extra,
  };
}

/** Records the group has committed on `topic` (sum over partitions) and the topic's total end offset. */
export async function groupProgress(
  groupId: string,
  topic: string,
): Promise<{ committed: number; end: number }> {
  const admin = testKafka().admin();
  await admin.connect();
  try {
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
    const ends = await admin.fetchTopicOffsets(topic);
    let c = 0;
    for (const p of committed?.partitions ?? []) if (Number(p.offset) > 0) c += Number(p.offset);
    const e = ends.reduce((n, p) => n + Number(p.high), 0);
    return { committed: c, end: e };
  } finally {
    await admin.disconnect();
  }
}

/** Polls `groupProgress` until `predicate` holds; returns the last progress. */
export async function waitForProgress(
  groupId: string,
  topic: string,
  predicate: (p: { committed: number; end: number }) => boolean,
  timeoutMs = 90_000,
): Promise<{ committed: number; end: number }> {
  const started = Date.now();
  for (;;) {
    const p = await groupProgress(groupId, topic);
    if (predicate(p)) return p;
    if (Date.now() - started > timeoutMs) {
      throw new Error(
        `group ${groupId} progress ${p.committed}/${p.end} did not reach the target in ${timeoutMs} ms`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** What a traffic generator sent, by kind. */
export interface SentTraffic {
  validIds: Set<string>;
  duplicates: number;
  malformedKeys: string[];
}

/**
 * Produces requests at a steady pace until `stop()`: mostly unique ids, every 10th a repeat of an
 * earlier id (same key, so same partition), every 25th malformed JSON.
 */
export function startTraffic(topic: string, opts: { perTick?: number; tickMs?: number } = {}) {
  const perTick = opts.perTick ?? 20;
  const tickMs = opts.tickMs ?? 100;
  const sent: SentTraffic = { validIds: new Set(), duplicates: 0, malformedKeys: [] };
  const producer = testKafka().producer();
  let running = true;
  let n = 0;
  const done = (async () => {
    await producer.connect();
    while (running) {
      const messages: { key: string; value: Buffer; headers?: Record<string, string> }[] = [];
      for (let i = 0; i < perTick; i++, n++) {
        if (n % 25 === 24) {
          const key = `bad-${n}`;
          sent.malformedKeys.push(key);
          messages.push({ key, value: Buffer.from("{broken") });
        } else if (n % 10 === 9 && n > 20) {
          const id = `t-${n - 15}`;
          if (sent.validIds.has(id)) sent.duplicates++;
          else sent.validIds.add(id); // its first occurrence (n − 15 was not a unique slot)
          messages.push({ key: id, value: Buffer.from(JSON.stringify({ id, text: "the cat again" })) });
        } else {
          const id = `t-${n}`;
          sent.validIds.add(id);
          messages.push({
            key: id,
            value: Buffer.from(JSON.stringify({ id, text: `the dog sat on a mat ${n}` })),
          });
        }
      }
      await producer.send({ topic, messages });
      await new Promise((r) => setTimeout(r, tickMs));
    }
    await producer.disconnect();
  })();
  return {
    sent,
    async stop(): Promise<SentTraffic> {
      running = false;
      await done;
      return sent;
    },
  };
}

/** The metrics/health base URL a running `sluice serve` logged in its "sluice serve running" line. */
export function metricsUrlOf(proc: ServeProcess): string {
  const m = /"metricsUrl":"(http:\/\/[^"]+)"/.exec(proc.output());
  if (!m?.[1]) throw new Error(`no metricsUrl in serve output yet:\n${proc.output().slice(-2000)}`);
  return m[1];
}

/** One series of a Prometheus text exposition. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition format (the subset prom-client writes). */
export function parsePrometheusText(text: string): MetricSample[] {
  const out: MetricSample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) throw new Error(`unparseable metrics line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    }
    const raw = m[3] as string;
    const value =
      raw === "+Inf" ? Number.POSITIVE_INFINITY : raw === "-Inf" ? Number.NEGATIVE_INFINITY : Number(raw);
    out.push({ name: m[1] as string, labels, value });
  }
  return out;
}

/** GETs `<metricsUrl>/metrics` and parses it. */
export async function scrapeMetrics(metricsUrl: string): Promise<MetricSample[]> {
  const res = await fetch(`${metricsUrl}/metrics`);
  if (res.status !== 200) throw new Error(`GET ${metricsUrl}/metrics answered ${res.status}`);
  return parsePrometheusText(await res.text());
}

/** Decodes result records read from a results topic. */
export function decodeResults(records: Pick<ReadRecord, "value" | "headers">[]): InferenceResult[] {
  return records.map((r) => decodeResult(r.value as Buffer, r.headers as Record<string, string>));
}

/** The request ids of result records read from a results topic, in read order. */
export function resultIds(records: Pick<ReadRecord, "value" | "headers">[]): string[] {
  return decodeResults(records).map((r) => r.id);
}

/** For `afterEach`: SIGKILLs every process a test left running (resuming stopped ones first). */
export function killLeftovers(procs: ServeProcess[]): void {
  for (const p of procs.splice(0)) {
    if (p.child.exitCode === null && p.child.signalCode === null) {
      p.child.kill("SIGCONT");
      p.child.kill("SIGKILL");
    }
  }
}

/**
 * Starts `sluice serve` with `env`, waits until it runs and each topic holds its `expected` records
 * (`readCommitted`), then stops it with SIGTERM (throws unless it exits 0) and reads each topic to its
 * end offsets, so a record serve wrote twice is in the result. The process is pushed to `procs`.
 * Returns the records per topic, in `reads` order, and the output.
 */
export async function serveAndRead(
  procs: ServeProcess[],
  env: Record<string, string>,
  reads: { topic: string; expected: number; timeoutMs?: number }[],
): Promise<{ records: ReadRecord[][]; output: string }> {
  const proc = startServe([], env);
  procs.push(proc);
  await proc.waitFor(/sluice serve running/, 120_000);
  for (const r of reads)
    await readCommitted(r.topic, { expected: r.expected, timeoutMs: r.timeoutMs ?? 90_000 });
  proc.child.kill("SIGTERM");
  const { code } = await proc.exited;
  if (code !== 0) throw new Error(`sluice serve exited with ${code}:\n${proc.output().slice(-3000)}`);
  const records: ReadRecord[][] = [];
  for (const r of reads)
    records.push(await readCommitted(r.topic, { expected: r.expected, timeoutMs: 10_000 }));
  return { records, output: proc.output() };
}

/**
 * Starts another `sluice serve` with `env`, waits until the group has committed everything on
 * `topic`, then stops it with SIGTERM; returns its exit code. The process is pushed to `procs`.
 */
export async function drainWithNewInstance(
  procs: ServeProcess[],
  env: Record<string, string>,
  group: string,
  topic: string,
): Promise<number | null> {
  const next = startServe([], env);
  procs.push(next);
  await next.waitFor(/sluice serve running/, 60_000);
  await waitForProgress(group, topic, (p) => p.committed === p.end, 120_000);
  next.child.kill("SIGTERM");
  return (await next.exited).code;
}

/** How many results each request id has on a results topic (read_committed). */
export function countResultIds(records: Pick<ReadRecord, "value" | "headers">[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of resultIds(records)) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

/** Stops a `sluice serve` with SIGTERM; throws (with its output's tail) unless it exits 0. */
export async function stopServe(p: ServeProcess): Promise<void> {
  p.child.kill("SIGTERM");
  const { code } = await p.exited;
  if (code !== 0) throw new Error(`sluice serve exited with ${code}:\n${p.output().slice(-3000)}`);
}

/**
 * The request ids a dedup changelog's records hold, as read by `readCommitted`: those of its dedup
 * segments (src/delivery/dedup-segment.ts), in order, and the keys of per-id records, if any.
 */
export function changelogIds(records: Pick<ReadRecord, "key" | "value">[]): string[] {
  return records.flatMap((r) => {
    if (r.key === null || r.value === null) return [];
    // The key was read as UTF-8: its leading 0xFF byte became U+FFFD.
    if (r.key.startsWith(`\uFFFD${DEDUP_SEGMENT_KEY_PREFIX.subarray(1).toString()}`))
      return (decodeDedupSegment(r.value) ?? []).map((e) => e.id);
    return r.key.startsWith("\uFFFD") ? [] : [r.key];
  });
}
