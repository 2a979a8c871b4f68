import type { Producer } from "kafkajs";
import { afterEach, describe, expect, it } from "vitest";
import { fixConcurrentTransactionsRetry } from "../../src/kafka/protocol/concurrent-transactions.js";
import { fixCoordinatorLookups } from "../../src/kafka/protocol/coordinator-cache.js";
import { readBounded } from "../../src/kafka/read/bounded-reader.js";
import { createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";

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
});
