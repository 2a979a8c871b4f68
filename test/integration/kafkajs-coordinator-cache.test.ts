import { Kafka, logLevel, type Producer } from "kafkajs";
import { afterEach, describe, expect, it } from "vitest";
import { fixConcurrentTransactionsRetry } from "../../src/kafka/protocol/concurrent-transactions.js";
import { fixCoordinatorLookups } from "../../src/kafka/protocol/coordinator-cache.js";
import { readBounded } from "../../src/kafka/read/bounded-reader.js";
import { createTopics, testBrokers, testKafka, uniqueName } from "../support/kafka-harness.js";

// kafkajs 2.2.4 sends a FindCoordinator request before each AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit and EndTxn (src/kafka/protocol/coordinator-cache.ts), and a transaction started
// while the coordinator still completes the previous one waits out a 300 ms retry
// (concurrent-transactions.ts). On a real broker: a transactional producer commits five transactions
// back to back with their offsets; with both corrections it looks each coordinator up once, no
// transaction waits a kafkajs retry, and every transaction commits its record and its offset.

const TRANSACTIONS = 5;

describe("kafkajs coordinator lookups", () => {
  const clients: Producer[] = [];
  afterEach(async () => {
    await Promise.allSettled(clients.splice(0).map((c) => c.disconnect()));
  });

  it("looks each coordinator up once across transactions, and every transaction commits", async () => {
    fixConcurrentTransactionsRetry();
    fixCoordinatorLookups();
    const topic = uniqueName("coordinator-cache");
    const groupId = uniqueName("coordinator-cache-group");
    await createTopics([{ topic, numPartitions: 1 }]);
    const kafka = testKafka();
    const producer = kafka.producer({
      transactionalId: uniqueName("coordinator-cache-txn"),
      idempotent: true,
      maxInFlightRequests: 1,
    });
    clients.push(producer);
    const requests: string[] = [];
    producer.on(producer.events.REQUEST, (e) => requests.push(e.payload.apiName));
    await producer.connect();
    for (let i = 0; i < TRANSACTIONS; i++) {
      const txn = await producer.transaction();
      await txn.send({ topic, messages: [{ value: `record-${i}` }] });
      await txn.sendOffsets({
        consumerGroupId: groupId,
        topics: [{ topic, partitions: [{ partition: 0, offset: String(i + 1) }] }],
      });
      await txn.commit();
    }
    const count = (api: string) => requests.filter((r) => r === api).length;
    expect(count("EndTxn")).toBe(TRANSACTIONS);
    expect(count("TxnOffsetCommit")).toBe(TRANSACTIONS);
    // One lookup of the transaction coordinator and one of the group coordinator (kafkajs alone: 4 per
    // transaction, 20 here).
    expect(count("GroupCoordinator")).toBe(2);
    // No kafkajs retry: a failed send refreshes the metadata, then waits 300 ms or more.
    expect(count("Metadata")).toBe(
      requests.filter((r, i) => r === "Metadata" && i < requests.indexOf("AddPartitionsToTxn")).length,
    );

    const seen: string[] = [];
    const { unfinished } = await readBounded({
      kafka,
      ranges: [{ topic, partition: 0, fromOffset: "0" }],
      order: "parallel",
      doing: `reading ${topic}`,
      timeoutMs: 20_000,
      onBatch: (_range, messages) => {
        for (const m of messages) seen.push(m.value?.toString() ?? "");
        return seen.length >= TRANSACTIONS;
      },
    });
    expect(unfinished).toEqual([]);
    expect(seen).toEqual(Array.from({ length: TRANSACTIONS }, (_, i) => `record-${i}`));
    const admin = kafka.admin();
    await admin.connect();
    try {
      const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
      expect(offsets?.partitions).toEqual([
        expect.objectContaining({ partition: 0, offset: String(TRANSACTIONS) }),
      ]);
    } finally {
      await admin.disconnect();
    }
  });

  it("a fresh admin's first group offset read looks the coordinator up without a failed attempt", async () => {
    fixCoordinatorLookups();
    const topic = uniqueName("coordinator-fresh");
    const groupId = uniqueName("coordinator-fresh-group");
    await createTopics([{ topic, numPartitions: 2 }]);
    // kafkajs's own log, at debug: its lookup says so when it fails for want of metadata and retries.
    const entries: string[] = [];
    const kafka = new Kafka({
      clientId: uniqueName("coordinator-fresh"),
      brokers: testBrokers(),
      logLevel: logLevel.DEBUG,
      logCreator: () => (e) => void entries.push(String(e.log.message)),
    });
    const requests: string[] = [];
    for (let i = 0; i < 2; i++) {
      const admin = kafka.admin();
      admin.on(admin.events.REQUEST, (e) => requests.push(e.payload.apiName));
      await admin.connect();
      try {
        const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
        expect(offsets?.partitions.map((p) => p.offset)).toEqual(["-1", "-1"]);
      } finally {
        await admin.disconnect();
      }
    }
    // kafkajs alone: "No brokers in the broker pool, refreshing metadata and trying again..." and a
    // wait of ~300 ms before the second attempt, for each fresh admin.
    expect(entries.filter((m) => m.includes("No brokers in the broker pool"))).toEqual([]);
    expect(requests.filter((r) => r === "OffsetFetch")).toHaveLength(2);
  });

  it("a new owner of a transactional id with an open transaction takes over without waiting out a kafkajs retry", async () => {
    fixConcurrentTransactionsRetry();
    fixCoordinatorLookups();
    const topic = uniqueName("takeover");
    await createTopics([{ topic, numPartitions: 1 }]);
    const transactionalId = uniqueName("takeover-txn");
    const entries: string[] = [];
    const kafka = (debug: boolean) =>
      new Kafka({
        clientId: uniqueName("takeover"),
        brokers: testBrokers(),
        logLevel: debug ? logLevel.DEBUG : logLevel.NOTHING,
        logCreator: () => (e) => void entries.push(String(e.log.message)),
      });
    const producer = (k: Kafka) => {
      const p = k.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
      clients.push(p);
      return p;
    };
    // The old owner leaves a transaction open (as an instance does when its partition moves).
    const old = producer(kafka(false));
    await old.connect();
    const open = await old.transaction();
    await open.send({ topic, messages: [{ value: "left open" }] });
    // The new owner's InitProducerId fences it; the coordinator answers CONCURRENT_TRANSACTIONS until
    // it has aborted that transaction.
    const next = producer(kafka(true));
    const requests: string[] = [];
    next.on(next.events.REQUEST, (e) => requests.push(e.payload.apiName));
    await next.connect();
    const txn = await next.transaction();
    await txn.send({ topic, messages: [{ value: "new owner" }] });
    await txn.commit();
    await expect(open.commit()).rejects.toThrow();
    expect(requests.filter((r) => r === "InitProducerId").length).toBeGreaterThanOrEqual(1);
    // kafkajs alone: "There is an ongoing transaction on this transactionId, retrying" and 300 ms or more.
    expect(entries.filter((m) => m.includes("ongoing transaction"))).toEqual([]);
  });
});
