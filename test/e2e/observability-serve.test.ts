import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeHeartbeat } from "../../src/contracts/freshness-heartbeat.js";
import type { GroupStatus } from "../../src/observability/group-status.js";
import { runCli } from "../support/cli-process.js";
import {
  createTopics,
  produceMessages,
  testBrokers,
  testKafka,
  uniqueName,
} from "../support/kafka-harness.js";
import {
  killLeftovers,
  type MetricSample,
  metricsUrlOf,
  readCommitted,
  resultIds,
  type ServeProcess,
  scrapeMetrics,
  serveEnv,
  startServe,
  waitForProgress,
} from "../support/serve-process.js";
import { createTinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

// Issue 5 acceptance end to end: the real `sluice serve` (child process, real Kafka) with the tiny
// generated model — these checks are about what the process reports, not about the model, and the
// real one would only cost time on 2 cores. Both tests share one group: the second restarts it.

const HOUR_MS = 3_600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Value of the one series `name` whose labels include `labels`; undefined when absent. */
function value(
  samples: MetricSample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const hits = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (hits.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} matches ${hits.length} series`);
  return hits[0]?.value;
}

function series(samples: MetricSample[], name: string): MetricSample[] {
  return samples.filter((s) => s.name === name);
}

/** Scrapes until `accept` returns true (or throws after `timeoutMs`); returns the accepted scrape. */
async function scrapeUntil(
  url: string,
  accept: (m: MetricSample[]) => boolean,
  what: string,
  timeoutMs = 20_000,
): Promise<MetricSample[]> {
  const started = Date.now();
  let last: MetricSample[] = [];
  while (Date.now() - started < timeoutMs) {
    last = await scrapeMetrics(url);
    if (accept(last)) return last;
    await sleep(100);
  }
  const sluice = last.filter(
    (s) => s.name.startsWith("sluice_consumer") || s.name.startsWith("sluice_records"),
  );
  throw new Error(`timed out waiting for ${what}; last scrape:\n${JSON.stringify(sluice, null, 1)}`);
}

describe("observability of a real `sluice serve`", () => {
  const base = uniqueName("obs-serve");
  const topic = `${base}.requests`;
  const group = `${base}-group`;
  // Random per run, so a hit can only come from this run's payloads.
  const CANARY = `canary${randomBytes(8).toString("hex")}`;
  const procs: ServeProcess[] = [];
  let dir: string;
  let modelEnv: Record<string, string>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-obs-serve-"));
    const tiny = await createTinyModel(dir, { task: "embedding" });
    modelEnv = tinyModelEnv(tiny);
    await createTopics([{ topic, numPartitions: 2 }]);
  });
  afterEach(() => killLeftovers(procs));
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function start(extra: Record<string, string>): ServeProcess {
    const p = startServe([], serveEnv(base, { ...modelEnv, ...extra }));
    procs.push(p);
    return p;
  }

  async function stop(p: ServeProcess): Promise<void> {
    p.child.kill("SIGTERM");
    const { code } = await p.exited;
    expect(code, p.output().slice(-3000)).toBe(0);
  }

  async function endOffsets(): Promise<Map<number, number>> {
    const admin = testKafka().admin();
    await admin.connect();
    try {
      return new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.high)]));
    } finally {
      await admin.disconnect();
    }
  }

  const produce = (messages: { key: string; value: Buffer; timestamp?: string }[]) =>
    produceMessages(topic, messages);

  const json = (o: unknown) => Buffer.from(JSON.stringify(o));

  it("after traffic: metric names and labels, request log, heartbeats while idle, no payload in debug logs", async () => {
    const heartbeatIntervalMs = 500;
    const serve = start({
      SLUICE_OBSERVABILITY__LOG_LEVEL: "debug",
      SLUICE_OBSERVABILITY__INSTANCE_ID: "obs-a",
      SLUICE_OBSERVABILITY__LAG_INTERVAL_MS: "300",
      SLUICE_OBSERVABILITY__HEARTBEAT_INTERVAL_MS: String(heartbeatIntervalMs),
    });
    await serve.waitFor(/sluice serve running/);
    const url = metricsUrlOf(serve);
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ alive: true });
    // Ready once both partitions are assigned and restored.
    const readyStarted = Date.now();
    let ready = await fetch(`${url}/readyz`);
    while (ready.status !== 200 && Date.now() - readyStarted < 20_000) {
      await sleep(100);
      ready = await fetch(`${url}/readyz`);
    }
    expect(await ready.json()).toEqual({ ready: true });

    const UNIQUE = 40;
    const DUPLICATES = 5;
    const messages: { key: string; value: Buffer }[] = [];
    for (let i = 0; i < UNIQUE; i++) {
      const text = i === 7 ? `the cat ${CANARY} sat` : `the dog sat on a mat ${i}`;
      messages.push({ key: `v-${i}`, value: json({ id: `v-${i}`, text, attributes: { note: CANARY } }) });
    }
    for (let i = 0; i < DUPLICATES; i++)
      messages.push({ key: `v-${i}`, value: json({ id: `v-${i}`, text: `again ${CANARY}` }) });
    // Three dead letters carrying the canary: the model fails on one item (the tiny model's poison
    // word), broken JSON, and a schema violation (id not a string).
    messages.push({ key: "poison", value: json({ id: "poison", text: `the overflow ${CANARY}` }) });
    messages.push({ key: "bad-json", value: Buffer.from(`{"id":"bad-json","text":"${CANARY}`) });
    messages.push({ key: "bad-schema", value: json({ id: 42, text: CANARY }) });
    await produce(messages);
    await waitForProgress(group, topic, (p) => p.committed === p.end && p.end === messages.length, 30_000);

    // Lag is sampled every 300 ms; wait for a sample taken after the last commit.
    const m = await scrapeUntil(
      url,
      (s) =>
        series(s, "sluice_consumer_lag_records").length === 2 &&
        series(s, "sluice_consumer_lag_records").every((x) => x.value === 0),
      "lag 0 on both partitions",
    );
    const caughtUpAtMs = Date.now();

    // Every Sluice series carries instance_id (never `instance`, which Prometheus owns).
    for (const s of m.filter((x) => x.name.startsWith("sluice_"))) {
      expect(s.labels.instance_id, s.name).toBe("obs-a");
      expect(s.labels.instance, s.name).toBeUndefined();
    }
    // Records by outcome, counted at commit.
    expect(value(m, "sluice_records_total", { outcome: "result" })).toBe(UNIQUE);
    expect(value(m, "sluice_records_total", { outcome: "dead_letter" })).toBe(3);
    expect(value(m, "sluice_records_total", { outcome: "duplicate" })).toBe(DUPLICATES);
    expect(value(m, "sluice_expired_total")).toBe(0);
    // End-to-end latency by status: one observation per committed record, all recent.
    expect(value(m, "sluice_end_to_end_latency_seconds_count", { status: "ok" })).toBe(UNIQUE);
    expect(value(m, "sluice_end_to_end_latency_seconds_count", { status: "dead_letter" })).toBe(3);
    expect(value(m, "sluice_end_to_end_latency_seconds_count", { status: "duplicate" })).toBe(DUPLICATES);
    expect(value(m, "sluice_end_to_end_latency_seconds_bucket", { status: "ok", le: "60" })).toBe(UNIQUE);
    // Batches: every reason exists from the start; flushed items are the decoded non-duplicates.
    const BATCHED = UNIQUE + 1;
    const reasons = series(m, "sluice_batches_total")
      .map((s) => s.labels.reason)
      .sort();
    expect(reasons).toEqual(["deadline", "shutdown", "size", "tokens", "wait"]);
    const batches = series(m, "sluice_batches_total").reduce((n, s) => n + s.value, 0);
    expect(batches).toBeGreaterThan(0);
    expect(value(m, "sluice_batch_size_count")).toBe(batches);
    expect(value(m, "sluice_batch_size_sum")).toBe(BATCHED);
    expect(value(m, "sluice_queue_wait_seconds_count")).toBe(BATCHED);
    expect(value(m, "sluice_inference_seconds_count")).toBe(batches);
    expect(value(m, "sluice_batch_tokens_sum")).toBeGreaterThan(UNIQUE);
    // Transactions: committed ones, the failure outcomes present at 0.
    expect(value(m, "sluice_transactions_total", { outcome: "committed" })).toBeGreaterThanOrEqual(2);
    for (const outcome of ["aborted", "fenced", "failed"])
      expect(value(m, "sluice_transactions_total", { outcome })).toBe(0);
    // The loaded model.
    const info = series(m, "sluice_model_info");
    expect(info).toHaveLength(1);
    expect(info[0]?.labels).toMatchObject({ name: "tiny", task: "embedding" });
    expect(info[0]?.labels.version).toMatch(/\S/);
    expect(info[0]?.value).toBe(1);
    // Lag and freshness gauges per owned partition; drain time per topic.
    for (const partition of ["0", "1"]) {
      expect(value(m, "sluice_consumer_lag_records", { topic, partition })).toBe(0);
      expect(value(m, "sluice_consumer_lag_seconds", { topic, partition })).toBe(0);
      const fresh = value(m, "sluice_freshness_seconds", { topic, partition });
      expect(fresh).toBeGreaterThanOrEqual(0);
      expect(fresh).toBeLessThan(60);
    }
    expect(value(m, "sluice_time_to_drain_seconds", { topic })).toBe(0);
    // Node process metrics, including event-loop delay.
    expect(value(m, "nodejs_eventloop_lag_p99_seconds")).toBeGreaterThanOrEqual(0);

    // Idle input: heartbeats keep coming and "complete up to" keeps advancing.
    await sleep(6 * heartbeatIntervalMs);
    const idleEndMs = Date.now();
    await stop(serve);

    // Request log: one line per batch, counts add up, ids hashed (never raw), no text.
    const lines = serve
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const batchLines = lines.filter((l) => l.component === "batch-log");
    expect(batchLines).toHaveLength(batches);
    const batchFields = batchLines.map(
      (l) => l.batch as { size: number; ok: number; failed: number; idHashes: string[] },
    );
    expect(batchFields.reduce((n, b) => n + b.size, 0)).toBe(BATCHED);
    expect(batchFields.reduce((n, b) => n + b.ok, 0)).toBe(UNIQUE);
    expect(batchFields.reduce((n, b) => n + b.failed, 0)).toBe(1);
    const hashes = new Set(batchFields.flatMap((b) => b.idHashes));
    const sha = (id: string) => createHash("sha256").update(id).digest("hex").slice(0, 16);
    for (let i = 0; i < UNIQUE; i++) expect(hashes.has(sha(`v-${i}`))).toBe(true);
    expect(hashes.has(sha("poison"))).toBe(true);
    expect(batchLines.map((l) => JSON.stringify(l)).join("\n")).not.toMatch(/"v-\d+"/);

    // Privacy: the canary went through every path (result, dead letters) yet no log line has it.
    expect(lines.length).toBeGreaterThan(batchLines.length);
    expect(serve.output()).not.toContain(CANARY);
    const dead = await readCommitted(`${base}.dlq`, { expected: 3, timeoutMs: 15_000 });
    expect(dead.map((d) => d.key).sort()).toEqual(["bad-json", "bad-schema", "poison"]);
    expect(dead.every((d) => d.value?.toString("utf8").includes(CANARY))).toBe(true);
    const results = await readCommitted(`${base}.results`, {
      expected: UNIQUE,
      timeoutMs: 15_000,
    });
    expect(new Set(resultIds(results)).size).toBe(UNIQUE);

    // Heartbeats: one per owned partition per interval, "complete up to" advancing while idle.
    const beats = (await readCommitted(`${base}.freshness`, { expected: 10, timeoutMs: 15_000 }))
      .map((r) => decodeHeartbeat(r.value as Buffer))
      .filter((b) => b.instanceId === "obs-a" && b.topic === topic);
    const rounds = new Map<number, number[]>();
    for (const b of beats) rounds.set(b.emittedAtMs, [...(rounds.get(b.emittedAtMs) ?? []), b.partition]);
    // Each round (one emittedAtMs) lists both owned partitions exactly once; rounds are an interval apart.
    expect(rounds.size).toBeGreaterThanOrEqual(5);
    for (const ps of rounds.values()) expect([...ps].sort()).toEqual([0, 1]);
    const idleRounds = [...rounds.keys()]
      .filter((t) => t >= caughtUpAtMs && t <= idleEndMs)
      .sort((a, b) => a - b);
    expect(idleRounds.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < idleRounds.length; i++) {
      const gap = (idleRounds[i] as number) - (idleRounds[i - 1] as number);
      expect(gap).toBeGreaterThanOrEqual(heartbeatIntervalMs * 0.9);
      expect(gap).toBeLessThan(heartbeatIntervalMs * 3);
    }
    for (const partition of [0, 1]) {
      const idle = beats
        .filter(
          (b) => b.partition === partition && b.emittedAtMs >= caughtUpAtMs && b.emittedAtMs <= idleEndMs,
        )
        .sort((a, b) => a.emittedAtMs - b.emittedAtMs);
      const upTo = idle.map((b) => b.completeUpToMs as number);
      expect(upTo.every((t) => typeof t === "number")).toBe(true);
      for (let i = 1; i < upTo.length; i++) expect(upTo[i]).toBeGreaterThanOrEqual(upTo[i - 1] as number);
      // It advanced by about the idle time although no record arrived.
      expect((upTo.at(-1) as number) - (upTo[0] as number)).toBeGreaterThanOrEqual(3 * heartbeatIntervalMs);
      expect(upTo.at(-1) as number).toBeGreaterThan(caughtUpAtMs); // past every input record's time
      expect(idle.at(-1)?.lagRecords).toBe(0);
      expect(idle.at(-1)?.committedOffset).toBeGreaterThan(0);
    }
  }, 90_000);

  it("restart after records piled up an hour late: lag N then 0, freshness and latency ≈ 1 h, no payload in logs", async () => {
    // While no instance runs: N records with one-hour-old timestamps.
    const before = await endOffsets();
    const oldTs = String(Date.now() - HOUR_MS);
    const deadlineMs = Date.now() + 10 * 60_000; // explicit deadline: old records are still answered
    const OK = 24;
    const EXPIRED = 4; // no deadline: record time + delivery.defaultTimeoutMs has long passed
    const messages: { key: string; value: Buffer; timestamp: string }[] = [];
    for (let i = 0; i < OK; i++) {
      const text = i === 3 ? `a ${CANARY} movie` : `a good movie ${i}`;
      messages.push({
        key: `late-${i}`,
        value: json({ id: `late-${i}`, text, deadlineMs }),
        timestamp: oldTs,
      });
    }
    for (let i = 0; i < EXPIRED; i++)
      messages.push({ key: `exp-${i}`, value: json({ id: `exp-${i}`, text: "the cat" }), timestamp: oldTs });
    messages.push({
      key: "late-bad",
      value: Buffer.from(`{"id":"late-bad","text":"${CANARY}`),
      timestamp: oldTs,
    });
    const N = messages.length;
    await produce(messages);
    const after = await endOffsets();
    const added = new Map([...after].map(([p, end]) => [p, end - (before.get(p) ?? 0)]));
    expect([...added.values()].reduce((a, b) => a + b, 0)).toBe(N);

    // `sluice status` (a CLI process, broker only) shows the N waiting records, about an hour late.
    const status = await runCli(["status", "--json", "--group", group, "--topic", topic], {
      KAFKA_BROKERS: testBrokers().join(","),
    });
    expect(status.code, status.stderr).toBe(0);
    const parsed = JSON.parse(status.stdout) as GroupStatus;
    expect(parsed.partitions.reduce((n, p) => n + p.lagRecords, 0)).toBe(N);
    for (const p of parsed.partitions) {
      expect(p.lagRecords).toBe(added.get(p.partition));
      if (p.lagRecords > 0) expect(Math.abs((p.lagSeconds as number) - 3600)).toBeLessThan(120);
    }

    // Restart at default log settings; a long commit interval keeps the backlog uncommitted for a while.
    const serve = start({
      SLUICE_OBSERVABILITY__INSTANCE_ID: "obs-b",
      SLUICE_OBSERVABILITY__LAG_INTERVAL_MS: "250",
      SLUICE_DELIVERY__COMMIT_INTERVAL_MS: "3000",
    });
    await serve.waitFor(/sluice serve running/);
    const url = metricsUrlOf(serve);
    const lagging = await scrapeUntil(
      url,
      (s) => series(s, "sluice_consumer_lag_records").length === 2,
      "a lag sample of both owned partitions",
    );
    expect(value(lagging, "sluice_records_total", { outcome: "result" })).toBe(0); // not caught up yet
    for (const [partition, n] of added)
      expect(value(lagging, "sluice_consumer_lag_records", { topic, partition: String(partition) })).toBe(n);
    // The oldest waiting record (read from the log, then known in flight) is an hour old.
    const busiest = String([...added].sort((a, b) => b[1] - a[1])[0]?.[0]);
    const lagSeconds = await scrapeUntil(
      url,
      (s) => (value(s, "sluice_consumer_lag_seconds", { topic, partition: busiest }) ?? 0) > 0,
      "lag seconds of the waiting records",
    );
    expect(value(lagSeconds, "sluice_records_total", { outcome: "result" })).toBe(0);
    expect(
      Math.abs(
        (value(lagSeconds, "sluice_consumer_lag_seconds", { topic, partition: busiest }) as number) - 3600,
      ),
    ).toBeLessThan(120);

    await waitForProgress(group, topic, (p) => p.committed === p.end, 30_000);
    const m = await scrapeUntil(
      url,
      (s) =>
        value(s, "sluice_records_total", { outcome: "result" }) === OK + EXPIRED &&
        series(s, "sluice_consumer_lag_records").every((x) => x.value === 0),
      "caught up: lag 0",
    );
    for (const partition of ["0", "1"])
      expect(value(m, "sluice_consumer_lag_seconds", { topic, partition })).toBe(0);
    expect(value(m, "sluice_records_total", { outcome: "dead_letter" })).toBe(1);
    expect(value(m, "sluice_expired_total")).toBe(EXPIRED);
    // Freshness: the last committed record is an hour old.
    for (const [partition, n] of added) {
      if (n === 0) continue;
      const f = value(m, "sluice_freshness_seconds", { topic, partition: String(partition) }) as number;
      expect(Math.abs(f - 3600), `freshness of partition ${partition}`).toBeLessThan(120);
    }
    // End-to-end latency: every record waited about an hour (all above the 300 s bucket).
    for (const [status, count] of [
      ["ok", OK],
      ["expired", EXPIRED],
      ["dead_letter", 1],
    ] as const) {
      expect(value(m, "sluice_end_to_end_latency_seconds_count", { status })).toBe(count);
      expect(value(m, "sluice_end_to_end_latency_seconds_bucket", { status, le: "300" })).toBe(0);
      const mean = (value(m, "sluice_end_to_end_latency_seconds_sum", { status }) as number) / count;
      expect(Math.abs(mean - 3600), `mean end-to-end latency of ${status}`).toBeLessThan(120);
    }

    await stop(serve);
    expect(serve.output()).not.toContain(CANARY);
  }, 90_000);

  it("two instances in one group: each reports exactly the partitions it owns", async () => {
    const base2 = uniqueName("obs-pair");
    const topic2 = `${base2}.requests`;
    await createTopics([{ topic: topic2, numPartitions: 2 }]);
    const env = (id: string) =>
      serveEnv(base2, {
        ...modelEnv,
        SLUICE_OBSERVABILITY__INSTANCE_ID: id,
        SLUICE_OBSERVABILITY__LAG_INTERVAL_MS: "250",
        SLUICE_OBSERVABILITY__HEARTBEAT_INTERVAL_MS: "500",
      });
    const a = startServe([], env("pair-a"));
    procs.push(a);
    await a.waitFor(/partition restored/);
    const b = startServe([], env("pair-b"));
    procs.push(b);
    await b.waitFor(/partition restored/);
    const owned = async (p: ServeProcess) =>
      series(await scrapeMetrics(metricsUrlOf(p)), "sluice_consumer_lag_records")
        .map((s) => Number(s.labels.partition))
        .sort();
    // After the rebalance each owns one partition; each reports that one only.
    const started = Date.now();
    let split: number[][] = [];
    while (Date.now() - started < 20_000) {
      split = [await owned(a), await owned(b)];
      if (split[0]?.length === 1 && split[1]?.length === 1) break;
      await sleep(200);
    }
    expect(split.flat().sort()).toEqual([0, 1]);
    // Heartbeats after the split come from the owner only.
    const splitAtMs = Date.now() + 600; // past a heartbeat round that might predate the split
    await sleep(2000);
    await Promise.all([stop(a), stop(b)]);
    const beats = (await readCommitted(`${base2}.freshness`, { expected: 4, timeoutMs: 15_000 }))
      .map((r) => decodeHeartbeat(r.value as Buffer))
      .filter((hb) => hb.emittedAtMs >= splitAtMs && hb.emittedAtMs < splitAtMs + 1000);
    const reporters = new Map<number, Set<string>>();
    for (const hb of beats)
      reporters.set(hb.partition, new Set([...(reporters.get(hb.partition) ?? []), hb.instanceId]));
    expect([...reporters.keys()].sort()).toEqual([0, 1]);
    for (const [partition, ids] of reporters) {
      expect(ids.size, `reporters of partition ${partition}`).toBe(1);
      const id = [...ids][0] as string;
      expect(split[id === "pair-a" ? 0 : 1]).toEqual([partition]);
    }
  }, 60_000);
});
