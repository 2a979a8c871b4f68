import type { KafkaMessage } from "kafkajs";
import { describe, expect, it } from "vitest";
import { readBounded } from "../../src/kafka/read/bounded-reader.js";
import {
  createTopics,
  endTransaction,
  produceMessages,
  testKafka,
  transactionalProducer,
  uniqueName,
} from "../support/kafka-harness.js";

/**
 * The one bounded reader, against the real broker: ranges end at their end offset even when the
 * last records are a commit marker and aborted data, sequential reads come partition by partition,
 * a position below the log start moves to the log start, a timeout returns the ranges it did not
 * finish instead of pretending they were read, and an abort ends the read. (That it needs no group
 * at all is shown on the secured broker: test/secure/connect.test.ts reads lag seconds with READ on
 * the topic only.)
 */
describe("readBounded on the real broker", () => {
  it("reads ranges that end in aborted data and a commit marker, partition by partition when sequential", async () => {
    const topic = uniqueName("bounded");
    await createTopics([{ topic, numPartitions: 2 }]);
    const kafka = testKafka();
    await produceMessages(topic, [
      { partition: 0, value: "p0-a" },
      { partition: 0, value: "p0-b" },
      { partition: 1, value: "p1-a" },
    ]);
    const producer = transactionalProducer(uniqueName("bounded-txn"), kafka);
    await producer.connect();
    const aborted = await producer.transaction();
    const abortedSent = await aborted.send({ topic, messages: [{ partition: 1, value: "p1-aborted" }] });
    await endTransaction(aborted, "abort", abortedSent, kafka);
    const committed = await producer.transaction();
    const committedSent = await committed.send({ topic, messages: [{ partition: 1, value: "p1-b" }] });
    await endTransaction(committed, "commit", committedSent, kafka);
    await producer.disconnect();
    const admin = kafka.admin();
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(topic);
    await admin.disconnect();

    const seen: string[] = [];
    const { unfinished } = await readBounded({
      kafka,
      ranges: ends
        .sort((a, b) => a.partition - b.partition)
        .map((o) => ({ topic, partition: o.partition, fromOffset: "0", endOffset: o.high })),
      order: "sequential",
      doing: `reading ${topic}`,
      timeoutMs: 30_000,
      onBatch: (_range, messages: readonly KafkaMessage[]) => {
        for (const m of messages) seen.push(m.value?.toString() ?? "");
        return undefined;
      },
    });
    expect(unfinished).toEqual([]);
    // Partition 1's log ends in the commit marker after p1-b; the aborted record is never delivered.
    expect(seen).toEqual(["p0-a", "p0-b", "p1-a", "p1-b"]);
  });

  it("moves a range whose records retention removed to the log start, as a reader from the beginning would", async () => {
    const topic = uniqueName("bounded-deleted");
    await createTopics([{ topic }]);
    await produceMessages(
      topic,
      ["r0", "r1", "r2", "r3", "r4"].map((value) => ({ value })),
    );
    const kafka = testKafka();
    const admin = kafka.admin();
    await admin.connect();
    await admin.fetchTopicMetadata({ topics: [topic] }); // deleteTopicRecords needs the leaders
    await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: "3" }] });
    await admin.disconnect();
    const seen: string[] = [];
    const { unfinished } = await readBounded({
      kafka,
      ranges: [{ topic, partition: 0, fromOffset: "0", endOffset: "5" }],
      order: "parallel",
      doing: `reading ${topic}`,
      timeoutMs: 30_000,
      onBatch: (_range, messages) => {
        for (const m of messages) seen.push(`${m.offset}:${m.value?.toString()}`);
        return undefined;
      },
    });
    expect(unfinished).toEqual([]);
    expect(seen).toEqual(["3:r3", "4:r4"]);
  });

  it("returns the ranges it did not finish when the timeout comes first", async () => {
    const topic = uniqueName("bounded-timeout");
    await createTopics([{ topic }]);
    await produceMessages(topic, [{ value: "only" }]);
    const started = Date.now();
    const range = { topic, partition: 0, fromOffset: "0", endOffset: "5" };
    const { unfinished } = await readBounded({
      kafka: testKafka(),
      ranges: [range],
      order: "parallel",
      doing: `reading ${topic}`,
      timeoutMs: 3_000,
      onBatch: () => undefined,
    });
    expect(unfinished).toEqual([range]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
  });

  it("ends when its signal aborts, and when onBatch says a range is done", async () => {
    const topic = uniqueName("bounded-abort");
    await createTopics([{ topic, numPartitions: 2 }]);
    await produceMessages(topic, [
      { partition: 0, value: "a" },
      { partition: 1, value: "b" },
    ]);
    const abort = new AbortController();
    const read = readBounded({
      kafka: testKafka(),
      ranges: [
        { topic, partition: 0, fromOffset: "0" },
        { topic, partition: 1, fromOffset: "0" },
      ],
      order: "parallel",
      doing: `reading ${topic}`,
      signal: abort.signal,
      // Partition 0 is done at its first record; partition 1 has no end and waits for more.
      onBatch: (range, messages) => {
        if (range.partition === 1 && messages.length > 0) setTimeout(() => abort.abort(), 200);
        return range.partition === 0 && messages.length > 0;
      },
    });
    const { unfinished } = await read;
    expect(unfinished.map((r) => r.partition)).toEqual([1]);
  });
});
