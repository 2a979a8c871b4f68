/**
 * Microbenchmark of back-to-back transactions on one partition, as a Sluice partition committer
 * at the Kafka-path ceiling runs them: a kafkajs transactional producer sends one 1 KB record, adds
 * its offset (`sendOffsets`) and commits, N times in a row. Four variants, each in its own child
 * process (the corrections patch kafkajs's classes for the whole process): kafkajs 2.2.4 alone, with
 * the coordinator cache only (src/kafka/protocol/coordinator-cache.ts), with the fast retry of
 * CONCURRENT_TRANSACTIONS only (concurrent-transactions.ts), and both (what `createKafka` applies).
 * Rounds alternate the order. Per run: total time, transaction p50 / p99 / max, FindCoordinator
 * requests, AddPartitionsToTxn requests the coordinator refused (sent − N) and Metadata requests (a
 * kafkajs retry refreshes the metadata first). Measures, never asserts.
 *
 *   KAFKA_BROKERS=127.0.0.1:19092 node --import tsx bench/transaction-round-trips-bench.ts [N] [rounds]
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { Kafka, logLevel } from "kafkajs";
import { fixConcurrentTransactionsRetry } from "../src/kafka/protocol/concurrent-transactions.js";
import { fixCoordinatorLookups } from "../src/kafka/protocol/coordinator-cache.js";

const VARIANTS = ["kafkajs", "cache", "retry", "both"] as const;
type Variant = (typeof VARIANTS)[number];

interface RunResult {
  variant: Variant;
  totalMs: number;
  p50: number;
  p99: number;
  max: number;
  findCoordinator: number;
  refusedAddPartitions: number;
  metadata: number;
}

const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:19092").split(",");

/** One run in this process: the variant's corrections, then N transactions. */
async function runOne(variant: Variant, n: number): Promise<RunResult> {
  if (variant === "retry" || variant === "both") fixConcurrentTransactionsRetry();
  if (variant === "cache" || variant === "both") fixCoordinatorLookups();
  const kafka = new Kafka({ clientId: "txn-round-trips", brokers, logLevel: logLevel.NOTHING });
  const topic = "sluice-bench-txn-round-trips";
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer({
    transactionalId: `sluice-bench-txn-${variant}-${process.pid}`,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  const requests: string[] = [];
  producer.on(producer.events.REQUEST, (e) => requests.push(e.payload.apiName));
  await producer.connect();
  const value = "x".repeat(1000);
  const durations: number[] = [];
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value }] });
    await txn.sendOffsets({
      consumerGroupId: "sluice-bench-txn-round-trips",
      topics: [{ topic, partitions: [{ partition: 0, offset: String(i + 1) }] }],
    });
    await txn.commit();
    durations.push(performance.now() - t);
  }
  const totalMs = performance.now() - started;
  await producer.disconnect();
  durations.sort((a, b) => a - b);
  const count = (api: string) => requests.filter((r) => r === api).length;
  return {
    variant,
    totalMs,
    p50: durations[Math.floor(n / 2)] as number,
    p99: durations[Math.min(n - 1, Math.floor(n * 0.99))] as number,
    max: durations[n - 1] as number,
    findCoordinator: count("GroupCoordinator"),
    refusedAddPartitions: count("AddPartitionsToTxn") - n,
    metadata: count("Metadata"),
  };
}

async function main(): Promise<void> {
  const [mode, arg1, arg2] = process.argv.slice(2);
  if (mode === "--child") {
    process.stdout.write(`${JSON.stringify(await runOne(arg1 as Variant, Number(arg2)))}\n`);
    return;
  }
  const n = Number(mode ?? 100);
  const rounds = Number(arg1 ?? 3);
  const self = fileURLToPath(import.meta.url);
  const results: RunResult[] = [];
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 === 1 ? [...VARIANTS] : [...VARIANTS].reverse();
    for (const variant of order) {
      const out = execFileSync(process.execPath, [...process.execArgv, self, "--child", variant, String(n)], {
        encoding: "utf8",
      });
      const r = JSON.parse(out.trim().split("\n").at(-1) as string) as RunResult;
      results.push(r);
      console.error(`round ${round} ${variant}: ${Math.round(r.totalMs)} ms`);
    }
  }
  const f1 = (x: number) => x.toFixed(1);
  console.log(
    `${n} back-to-back transactions per run, ${rounds} rounds (order alternating), brokers ${brokers.join(",")}\n`,
  );
  console.log(
    "| variant | total ms per run | transaction p50 ms | p99 ms | max ms | FindCoordinator | AddPartitionsToTxn refused | Metadata |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const variant of VARIANTS) {
    const rs = results.filter((r) => r.variant === variant);
    const list = (pick: (r: RunResult) => string) => rs.map(pick).join(" / ");
    console.log(
      `| ${variant} | ${list((r) => String(Math.round(r.totalMs)))} | ${list((r) => f1(r.p50))} | ${list((r) => f1(r.p99))} | ${list((r) => f1(r.max))} | ${list((r) => String(r.findCoordinator))} | ${list((r) => String(r.refusedAddPartitions))} | ${list((r) => String(r.metadata))} |`,
    );
  }
}

await main();
