import { describe, expect, it } from "vitest";
import type { OutboundMessage } from "../../src/delivery/outbound-message.js";
import { partitionSubject } from "../../src/kafka/write/produce-failure.js";
import {
  TransactionalProducer,
  type TransactionalProducerOptions,
} from "../../src/kafka/write/transactional-producer.js";
import { committedRecords, createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";

/** The one transactional write path against the real broker: fencing, byte-bounded sends, size refusals. */
const kafka = testKafka();

const options = (topic: string, transactionalId = uniqueName("tp")): TransactionalProducerOptions => ({
  kafka,
  transactionalId,
  transactionTimeoutMs: 30_000,
  maxSendBytes: 524_288,
  subject: partitionSubject(topic, 0),
  access: [],
});

const record = (topic: string, i: number, bytes: number): OutboundMessage => ({
  topic,
  partition: 0,
  key: `k-${i}`,
  value: Buffer.alloc(bytes, 97),
});

async function committedKeys(topic: string): Promise<string[]> {
  return (await committedRecords(topic, kafka)).map((m) => String(m.key));
}

describe("TransactionalProducer on the test broker", () => {
  it("writes more than the broker's record-batch limit to one partition in one transaction", async () => {
    const topic = uniqueName("tp-big");
    await createTopics([{ topic }]);
    const producer = await TransactionalProducer.open(options(topic));
    try {
      // 500 records of 8 KB to one partition: ~4 MB, four times the broker's 1 MiB default.
      const records = Array.from({ length: 500 }, (_, i) => record(topic, i, 8_000));
      const sends = await producer.run({ records }, "publishing");
      expect(sends.length).toBeGreaterThan(4);
      expect(sends.flatMap((s) => s.records).length).toBe(500);
    } finally {
      await producer.close();
    }
    // The commit markers land after EndTxn returns: wait for them, then every key, in order.
    await expect
      .poll(() => committedKeys(topic), { timeout: 15_000, interval: 250 })
      .toEqual(Array.from({ length: 500 }, (_, i) => `k-${i}`));
  });

  it("learns a topic's smaller max.message.bytes from the broker and names a record too large alone", async () => {
    const topic = uniqueName("tp-small");
    await createTopics([{ topic, configEntries: [{ name: "max.message.bytes", value: "20000" }] }]);
    const producer = await TransactionalProducer.open(options(topic));
    try {
      // 40 records of 4 KB: one 160 KB send is refused; halving the bound makes the sends fit.
      const records = Array.from({ length: 40 }, (_, i) => record(topic, i, 4_000));
      let attempts = 0;
      for (;;) {
        attempts++;
        try {
          await producer.run({ records }, "publishing");
          break;
        } catch (error) {
          expect(error).toMatchObject({ code: "PUBLISH_TOO_LARGE", retriable: true });
          expect(attempts).toBeLessThan(10);
        }
      }
      expect(attempts).toBeGreaterThan(1);
      expect(producer.maxSendBytes).toBeLessThan(20_000);

      // One record above the topic's limit is refused alone: permanent, and the unit says which.
      const alone = [record(topic, 100, 100), record(topic, 101, 30_000), record(topic, 102, 100)];
      const refused = await producer.run({ records: alone }, "publishing").catch((e: unknown) => e);
      expect(refused).toMatchObject({ code: "PUBLISH_TOO_LARGE", retriable: false });
      const context = (refused as { context: Record<string, unknown> }).context;
      expect(context["records"]).toBe(1);
      expect(alone[context["recordIndex"] as number]?.key).toBe("k-101");

      // The producer stays usable after a size refusal (it was renewed).
      await producer.run({ records: [record(topic, 200, 100)] }, "publishing");
    } finally {
      await producer.close();
    }
    await expect
      .poll(() => committedKeys(topic), { timeout: 15_000, interval: 250 })
      .toEqual([...Array.from({ length: 40 }, (_, i) => `k-${i}`), "k-200"]);
  });

  it("fences the earlier holder of its transactional id", async () => {
    const topic = uniqueName("tp-fence");
    await createTopics([{ topic }]);
    const id = uniqueName("tp-fenced");
    const first = await TransactionalProducer.open(options(topic, id));
    const second = await TransactionalProducer.open(options(topic, id));
    try {
      const failure = await first
        .run({ records: [record(topic, 1, 10)] }, "publishing")
        .catch((e: unknown) => e);
      expect(failure).toMatchObject({ code: "PRODUCER_FENCED" });
      await second.run({ records: [record(topic, 2, 10)] }, "publishing");
    } finally {
      await first.close();
      await second.close();
    }
    await expect.poll(() => committedKeys(topic), { timeout: 15_000, interval: 250 }).toEqual(["k-2"]);
  });
});
