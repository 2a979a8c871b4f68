import type { KafkaMessage } from "kafkajs";
import { describe, expect, it } from "vitest";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";

// kafkajs 2.2.4 returns aborted records to read_committed consumers when transactions are aborted in
// a different order than they started (see src/kafka/protocol/aborted-transaction-order.ts). Fencing produces
// exactly that pattern on our output partitions.
async function readAll(topic: string): Promise<string[]> {
  const consumer = testKafka().consumer({ groupId: uniqueName("aborted-reader"), readUncommitted: false });
  const keys: string[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }: { message: KafkaMessage }) => {
        keys.push(message.key?.toString() ?? "");
      },
    });
    const until = Date.now() + 4000;
    while (Date.now() < until && !keys.includes("committed")) await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    await consumer.disconnect();
  }
  return keys;
}

describe("read_committed with transactions aborted out of start order", () => {
  it("never returns records of aborted transactions", async () => {
    const topic = uniqueName("aborted-order");
    await createTopics([{ topic, numPartitions: 1 }]);
    const kafka = testKafka();
    const x = kafka.producer({ transactionalId: `${topic}-x`, idempotent: true, maxInFlightRequests: 1 });
    const y = kafka.producer({ transactionalId: `${topic}-y`, idempotent: true, maxInFlightRequests: 1 });
    const z = kafka.producer({ transactionalId: `${topic}-z`, idempotent: true, maxInFlightRequests: 1 });
    await Promise.all([x.connect(), y.connect(), z.connect()]);
    const tx = await x.transaction();
    await tx.send({ topic, messages: [{ key: "aborted-x", value: "1" }] }); // starts first
    const ty = await y.transaction();
    await ty.send({ topic, messages: [{ key: "aborted-y", value: "2" }] });
    await ty.abort(); // aborted first
    await tx.abort(); // aborted last: index order [y, x], start order [x, y]
    const tz = await z.transaction();
    await tz.send({ topic, messages: [{ key: "committed", value: "3" }] });
    await tz.commit();
    await Promise.all([x.disconnect(), y.disconnect(), z.disconnect()]);

    fixAbortedTransactionOrder();
    expect(await readAll(topic)).toEqual(["committed"]);
  }, 30_000);
});
