import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFreshness } from "../../src/client/freshness-reader.js";
import { type FreshnessHeartbeat as Beat, decodeHeartbeat } from "../../src/contracts/freshness-heartbeat.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { kafkaLagReaders } from "../../src/kafka/probes/kafka-lag-readers.js";
import { KafkaHeartbeatSink } from "../../src/kafka/write/kafka-heartbeat-sink.js";
import { HeartbeatPublisher } from "../../src/observability/heartbeat-publisher.js";
import { LagMonitor } from "../../src/observability/lag-monitor.js";
import {
  commitGroupOffsets,
  createTopics,
  testBrokers,
  testKafka,
  uniqueName,
} from "../support/kafka-harness.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every record on the freshness topic, read to its current end. */
async function readAllBeats(topic: string): Promise<Beat[]> {
  const kafka = testKafka();
  const admin = kafka.admin();
  await admin.connect();
  const end = Number((await admin.fetchTopicOffsets(topic))[0]!.high);
  await admin.disconnect();
  const beats: Beat[] = [];
  if (end === 0) return beats;
  const consumer = kafka.consumer({ groupId: uniqueName("beats-reader"), maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise<void>((resolve) => {
    void consumer.run({
      eachMessage: async ({ message }) => {
        beats.push(decodeHeartbeat(message.value!));
        if (Number(message.offset) + 1 >= end) resolve();
      },
    });
  });
  await Promise.race([done, sleep(15_000)]);
  await consumer.disconnect();
  return beats;
}

describe("HeartbeatPublisher against a real broker", () => {
  const input = uniqueName("obs-hb-in");
  const freshnessTopic = uniqueName("obs-hb-fresh");
  const groupId = uniqueName("obs-hb-group");
  const kafka = testKafka();
  const events = new SluiceEvents();
  const intervalMs = 300;
  const monitor = new LagMonitor({ ...kafkaLagReaders(kafka), groupId, topics: [input], events, intervalMs });
  const heartbeat = new HeartbeatPublisher({
    sink: new KafkaHeartbeatSink(kafka, { topic: freshnessTopic }),
    events,
    groupId,
    instanceId: "test-instance",
    intervalMs,
  });
  const oldTs = Date.now() - 3_600_000;

  beforeAll(async () => {
    await createTopics([{ topic: input, numPartitions: 2 }, { topic: freshnessTopic }]);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic: input,
      messages: [0, 1, 2].map((i) => ({
        partition: 0,
        key: `k${i}`,
        value: "{}",
        timestamp: String(oldTs + i),
      })),
    });
    await producer.disconnect();
  });

  afterAll(async () => {
    await heartbeat.stop();
    await monitor.stop();
  });

  it("publishes one record per owned partition per interval; complete-up-to advances while idle", async () => {
    // What the consumer loop would emit on assignment; this instance owns both partitions.
    events.emit("partitions.assigned", { topic: input, partitions: [0, 1] });
    await monitor.sample();
    const startedAt = Date.now();
    await heartbeat.start();
    monitor.start();
    await sleep(1500);

    // Commit partition 0 to its end, the way the processor does (and say so on the event bus).
    await commitGroupOffsets(kafka, groupId, input, [{ partition: 0, offset: "3" }]);
    events.emit("transaction.finished", {
      topic: input,
      partition: 0,
      outcome: "committed",
      records: 3,
      durationMs: 5,
      nextOffset: "3",
      lastEventTimestampMs: oldTs + 2,
    });
    await sleep(1500);
    await heartbeat.stop();
    const intervals = (Date.now() - startedAt) / intervalMs;
    await monitor.stop();

    const beats = await readAllBeats(freshnessTopic);
    const byEmit = new Map<number, Beat[]>();
    for (const b of beats) byEmit.set(b.emittedAtMs, [...(byEmit.get(b.emittedAtMs) ?? []), b]);
    // One beat per interval (give or take scheduling slack); each covers exactly the owned partitions.
    expect(byEmit.size).toBeGreaterThanOrEqual(Math.floor(intervals * 0.6));
    expect(byEmit.size).toBeLessThanOrEqual(Math.ceil(intervals) + 1);
    for (const group of byEmit.values()) {
      expect(group.map((b) => b.partition).sort()).toEqual([0, 1]);
      for (const b of group) expect(b).toMatchObject({ instanceId: "test-instance", groupId, topic: input });
    }

    const p0 = beats.filter((b) => b.partition === 0);
    const p1 = beats.filter((b) => b.partition === 1);
    // Partition 1 is empty and idle: caught up, complete up to the latest lag sample, advancing.
    const p1Times = p1.map((b) => b.completeUpToMs!);
    expect(p1Times.every((t, i) => i === 0 || t >= p1Times[i - 1]!)).toBe(true);
    expect(p1Times.at(-1)! - p1Times[0]!).toBeGreaterThanOrEqual(2000);
    expect(p1.at(-1)).toMatchObject({ lagRecords: 0, lagSeconds: 0 });

    // Partition 0 before its commit: 3 records of lag, an hour old, nothing complete yet.
    expect(p0[0]).toMatchObject({ committedOffset: -1, lagRecords: 3, completeUpToMs: null });
    expect(p0[0]!.lagSeconds).toBeGreaterThan(3590);
    // After the commit: caught up, so complete up to (about) now, and it keeps advancing while idle.
    const last = p0.at(-1)!;
    expect(last).toMatchObject({
      committedOffset: 3,
      lastCommittedEventTimestampMs: oldTs + 2,
      lagRecords: 0,
    });
    expect(last.completeUpToMs!).toBeGreaterThan(Date.now() - 3000);

    // The client helper returns the latest heartbeat per input partition.
    const latest = await readFreshness({ brokers: testBrokers(), topic: freshnessTopic, groupId });
    expect(latest.map((b) => [b.topic, b.partition])).toEqual([
      [input, 0],
      [input, 1],
    ]);
    expect(latest[0]).toEqual(last);
    expect(await readFreshness({ brokers: testBrokers(), topic: freshnessTopic, groupId: "other" })).toEqual(
      [],
    );
  });
});
