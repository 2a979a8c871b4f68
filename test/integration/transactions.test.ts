import type { Consumer } from "kafkajs";
import { afterEach, describe, expect, it } from "vitest";
import { createTopics, testKafka, transactionalProducer, uniqueName } from "../support/kafka-harness.js";

/**
 * Acceptance for the broker the tests run against: Kafka transactions work end to end. One
 * transaction commits, one aborts, another commits; a read_committed consumer sees exactly the
 * committed records, in order, while a read_uncommitted consumer also sees the aborted one (so the
 * aborted record really reached the log and it is the isolation level that hides it).
 */
describe("Kafka transactions on the test broker", () => {
  const consumers: Consumer[] = [];
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.disconnect()));
  });

  async function readUntil(readUncommitted: boolean, topic: string, lastValue: string): Promise<string[]> {
    const consumer = testKafka().consumer({ groupId: uniqueName("txn-group"), readUncommitted });
    consumers.push(consumer);
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    const seen: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`did not see ${lastValue}; saw ${seen.join(",")}`)),
        30_000,
      );
      void consumer.run({
        eachMessage: async ({ message }) => {
          const value = message.value?.toString() ?? "";
          seen.push(value);
          // Single partition, so once the last committed value arrives everything before it was delivered.
          if (value === lastValue) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    return seen;
  }

  it("a read_committed consumer sees exactly the committed records", async () => {
    const topic = uniqueName("txn");
    await createTopics([{ topic, numPartitions: 1 }]);
    const producer = transactionalProducer(uniqueName("txn-producer"));
    await producer.connect();
    try {
      const first = await producer.transaction();
      await first.send({
        topic,
        messages: [
          { key: "a", value: "committed-1" },
          { key: "b", value: "committed-2" },
        ],
      });
      await first.commit();

      const second = await producer.transaction();
      await second.send({ topic, messages: [{ key: "c", value: "aborted-1" }] });
      await second.abort();

      const third = await producer.transaction();
      await third.send({ topic, messages: [{ key: "d", value: "committed-3" }] });
      await third.commit();
    } finally {
      await producer.disconnect();
    }

    expect(await readUntil(false, topic, "committed-3")).toEqual([
      "committed-1",
      "committed-2",
      "committed-3",
    ]);
    expect(await readUntil(true, topic, "committed-3")).toEqual([
      "committed-1",
      "committed-2",
      "aborted-1",
      "committed-3",
    ]);
  });
});
