import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatStatusTable } from "../../src/app/group-status-table.js";
import { type LagSample, SluiceEvents } from "../../src/events/sluice-events.js";
import { kafkaLagReaders } from "../../src/kafka/probes/kafka-lag-readers.js";
import { readGroupStatus } from "../../src/observability/group-status.js";
import { InFlightRecords } from "../../src/observability/in-flight-records.js";
import { LagMonitor } from "../../src/observability/lag-monitor.js";
import { SluiceMetrics } from "../../src/observability/metrics.js";
import {
  commitGroupOffsets,
  createTopics,
  testKafka,
  transactionalProducer,
  uniqueName,
} from "../support/kafka-harness.js";

const HOUR_MS = 3_600_000;

/** Parses one gauge value out of Prometheus text exposition. */
function gaugeValue(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort();
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const m = /^[^{]+\{([^}]*)\} (\S+)$/.exec(line);
    if (!m) continue;
    const have = m[1]!.split(",").sort();
    if (want.every((w) => have.includes(w))) return Number(m[2]);
  }
  return undefined;
}

async function sampleUntil(monitor: LagMonitor, done: (s: LagSample) => boolean): Promise<LagSample> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const s = await monitor.sample();
    if (done(s) || Date.now() > deadline) return s;
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("LagMonitor and lag/freshness gauges against a real broker", () => {
  const topic = uniqueName("obs-lag");
  const groupId = uniqueName("obs-lag-group");
  const kafka = testKafka();
  const events = new SluiceEvents();
  const metrics = new SluiceMetrics({ collectDefaultMetrics: false });
  metrics.attach(events);
  const monitor = new LagMonitor({
    ...kafkaLagReaders(kafka),
    groupId,
    topics: [topic],
    events,
    readCommittedTimestamps: true,
    intervalMs: 5000,
  });
  const oldTs = Date.now() - HOUR_MS;

  beforeAll(async () => {
    await createTopics([{ topic, numPartitions: 2 }]);
    const producer = kafka.producer();
    await producer.connect();
    // Partition 0: ten records one hour old; partition 1: five fresh ones.
    await producer.send({
      topic,
      messages: Array.from({ length: 10 }, (_, i) => ({
        partition: 0,
        key: `id-${i}`,
        value: `{"id":"id-${i}","text":"x"}`,
        timestamp: String(oldTs + i * 1000),
      })),
    });
    await producer.send({
      topic,
      messages: Array.from({ length: 5 }, (_, i) => ({ partition: 1, key: `f-${i}`, value: "{}" })),
    });
    await producer.disconnect();
  });

  afterAll(async () => {
    await monitor.stop();
  });

  it("reports full lag with no consumer and no commits; lag seconds follow the record timestamps", async () => {
    const s = await monitor.sample();
    const p0 = s.partitions.find((p) => p.partition === 0)!;
    const p1 = s.partitions.find((p) => p.partition === 1)!;
    expect(p0).toMatchObject({ committedOffset: null, endOffset: "10", lagRecords: 10 });
    expect(p0.lagSeconds).toBeGreaterThan(3590);
    expect(p0.lagSeconds).toBeLessThan(3700);
    expect(p1.lagRecords).toBe(5);
    expect(p1.lagSeconds).toBeLessThan(120);
    expect(s.topics).toEqual([expect.objectContaining({ topic, lagRecords: 15 })]);
    const text = await metrics.scrape();
    expect(gaugeValue(text, "sluice_consumer_lag_records", { topic, partition: "0" })).toBe(10);
    expect(gaugeValue(text, "sluice_consumer_lag_seconds", { topic, partition: "0" })).toBeGreaterThan(3590);
  });

  it("after partial and then full commits: lag 1 with freshness ~1h, then lag 0 and lag seconds 0", async () => {
    await commitGroupOffsets(kafka, groupId, topic, [{ partition: 0, offset: "9" }]);
    let s = await sampleUntil(monitor, (x) => x.partitions[0]!.committedOffset === "9");
    let p0 = s.partitions.find((p) => p.partition === 0)!;
    expect(p0).toMatchObject({ committedOffset: "9", lagRecords: 1 });
    // The first uncommitted record (offset 9) and the last committed one (offset 8), both ~1h old.
    expect(p0.lagSeconds).toBeCloseTo((Date.now() - (oldTs + 9000)) / 1000, -1);
    expect(p0.lastCommittedEventTimestampMs).toBe(oldTs + 8000);
    let text = await metrics.scrape();
    const freshness = gaugeValue(text, "sluice_freshness_seconds", { topic, partition: "0" })!;
    expect(freshness).toBeGreaterThan(3590);
    expect(freshness).toBeLessThan(3700);

    await commitGroupOffsets(kafka, groupId, topic, [
      { partition: 0, offset: "10" },
      { partition: 1, offset: "5" },
    ]);

    // Transactional offset commits become visible to OffsetFetch once the commit marker is applied.
    s = await sampleUntil(monitor, (x) => x.partitions.every((p) => p.lagRecords === 0));
    p0 = s.partitions.find((p) => p.partition === 0)!;
    const p1 = s.partitions.find((p) => p.partition === 1)!;
    expect(p0).toMatchObject({ committedOffset: "10", lagRecords: 0, lagSeconds: 0 });
    expect(p1).toMatchObject({ committedOffset: "5", lagRecords: 0, lagSeconds: 0 });
    expect(s.topics[0]).toMatchObject({ lagRecords: 0, timeToDrainSeconds: 0 });
    expect(s.topics[0]!.throughputRecordsPerSecond).toBeGreaterThan(0);
    text = await metrics.scrape();
    expect(gaugeValue(text, "sluice_consumer_lag_records", { topic, partition: "0" })).toBe(0);
    expect(gaugeValue(text, "sluice_consumer_lag_seconds", { topic, partition: "1" })).toBe(0);
    expect(gaugeValue(text, "sluice_time_to_drain_seconds", { topic })).toBe(0);
  });

  it("sluice status reads the same from the broker alone, as a table and as JSON data", async () => {
    const status = await readGroupStatus({ ...kafkaLagReaders(kafka), groupId });
    expect(status.partitions.map((p) => [p.partition, p.committedOffset, p.endOffset, p.lagRecords])).toEqual(
      [
        [0, "10", "10", 0],
        [1, "5", "5", 0],
      ],
    );
    const p0 = status.partitions[0]!;
    expect(p0.lagSeconds).toBe(0);
    expect(p0.lastCommittedEventTimestampMs).toBe(oldTs + 9000);
    expect(p0.freshnessSeconds).toBeGreaterThan(3590);
    expect(p0.completeUpToMs).toBe(status.sampledAtMs);
    const table = formatStatusTable(status);
    expect(table).toContain(`GROUP ${groupId}`);
    expect(table).toMatch(new RegExp(`${topic}\\s+0\\s+10\\s+10\\s+0\\s+0\\.0\\s+\\d{4}\\s`));

    // A group that has committed nothing: full lag, lag seconds from the oldest record.
    const fresh = await readGroupStatus({
      ...kafkaLagReaders(kafka),
      groupId: uniqueName("nobody"),
      topics: [topic],
    });
    expect(fresh.partitions.map((p) => [p.committedOffset, p.lagRecords])).toEqual([
      [null, 10],
      [null, 5],
    ]);
    expect(fresh.partitions[0]!.lagSeconds).toBeGreaterThan(3590);
    expect(fresh.partitions[0]!.completeUpToMs).toBeNull();
    await expect(
      readGroupStatus({ ...kafkaLagReaders(kafka), groupId: uniqueName("nobody") }),
    ).rejects.toMatchObject({
      code: "INPUT_INVALID",
    });
  });

  it("takes lag seconds of owned partitions from in-flight records, without reading the log", async () => {
    const ev = new SluiceEvents();
    const inFlight = new InFlightRecords(ev);
    const owned = new LagMonitor({
      ...kafkaLagReaders(kafka),
      intervalMs: 5000,
      groupId: uniqueName("obs-lag-owned"),
      topics: [topic],
      inFlight,
      ownedPartitionsOnly: true,
    });
    try {
      ev.emit("partitions.assigned", { topic, partitions: [0] });
      // The processor consumed offset 0 but has not committed; its timestamp (as the consumer saw it)
      // is what lag seconds must use. The log says one hour; in flight we say 5 s, to tell them apart.
      ev.emit("record.consumed", { topic, partition: 0, offset: "0", timestampMs: Date.now() - 5000 });
      const s = await owned.sample();
      expect(s.partitions.map((p) => p.partition)).toEqual([0]);
      expect(s.partitions[0]!.lagRecords).toBe(10);
      expect(s.partitions[0]!.lagSeconds).toBeGreaterThan(4);
      expect(s.partitions[0]!.lagSeconds).toBeLessThan(60);
    } finally {
      await owned.stop();
    }
  });
});

describe("lag counts data records only (transactional and aborted input) against a real broker", () => {
  const kafka = testKafka();

  /** Writes `count` records to partition 0 of `topic` in one transaction, committed or aborted. */
  async function produceInTransaction(topic: string, prefix: string, count: number, commit: boolean) {
    const producer = transactionalProducer(uniqueName("obs-lag-tx"), kafka);
    await producer.connect();
    try {
      const tx = await producer.transaction();
      await tx.send({
        topic,
        messages: Array.from({ length: count }, (_, i) => ({
          partition: 0,
          key: `${prefix}-${i}`,
          value: "{}",
        })),
      });
      if (commit) await tx.commit();
      else await tx.abort();
    } finally {
      await producer.disconnect();
    }
  }

  /** Samples until the group's commit is visible, then returns that sample and the next one. */
  async function twoSamplesAt(monitor: LagMonitor, committed: string): Promise<[LagSample, LagSample]> {
    const first = await sampleUntil(monitor, (s) => s.partitions[0]?.committedOffset === committed);
    expect(first.partitions[0]!.committedOffset).toBe(committed);
    return [first, await monitor.sample()];
  }

  it("an idle topic written by a transactional producer reads 0 records, 0 s and 0 s to drain", async () => {
    const topic = uniqueName("obs-lag-txn");
    const groupId = uniqueName("obs-lag-txn-group");
    await createTopics([{ topic, numPartitions: 1 }]);
    await produceInTransaction(topic, "a", 5, true);
    const events = new SluiceEvents();
    const metrics = new SluiceMetrics({ collectDefaultMetrics: false });
    metrics.attach(events);
    const monitor = new LagMonitor({
      ...kafkaLagReaders(kafka),
      groupId,
      topics: [topic],
      events,
      intervalMs: 1000,
    });
    try {
      // Before any commit: the five data records are the lag (the commit marker is not). The
      // coordinator writes the marker after commit() returns; until then the last stable offset is 0.
      // A probe that times out on a busy broker reports offsets only (6) for that sample; the next reads the log.
      const before = await sampleUntil(
        monitor,
        (s) => s.partitions[0]?.endOffset === "6" && s.partitions[0]?.lagRecords === 5,
      );
      expect(before.partitions[0]).toMatchObject({ endOffset: "6", lagRecords: 5 });
      // The group processed all five and committed 5; the marker at offset 5 stays after it.
      await commitGroupOffsets(kafka, groupId, topic, [{ partition: 0, offset: "5" }]);
      const [first, second] = await twoSamplesAt(monitor, "5");
      for (const s of [first, second]) {
        expect(s.partitions[0]).toMatchObject({
          committedOffset: "5",
          endOffset: "6",
          lagRecords: 0,
          lagSeconds: 0,
        });
        expect(s.topics[0]).toMatchObject({ lagRecords: 0, timeToDrainSeconds: 0 });
      }
      const text = await metrics.scrape();
      expect(gaugeValue(text, "sluice_consumer_lag_records", { topic, partition: "0" })).toBe(0);
      expect(gaugeValue(text, "sluice_time_to_drain_seconds", { topic })).toBe(0);
      const status = await readGroupStatus({ ...kafkaLagReaders(kafka), groupId, topics: [topic] });
      expect(status.partitions[0]).toMatchObject({
        lagRecords: 0,
        lagSeconds: 0,
        completeUpToMs: status.sampledAtMs,
      });
      expect(formatStatusTable(status)).toContain("total lag 0");
    } finally {
      await monitor.stop();
    }
  });

  it("a topic ending in aborted transactions reads 0; a backlog around them counts its data records", async () => {
    const topic = uniqueName("obs-lag-abort");
    const groupId = uniqueName("obs-lag-abort-group");
    await createTopics([{ topic, numPartitions: 1 }]);
    await produceInTransaction(topic, "ok", 3, true); // offsets 0-2, marker 3
    await produceInTransaction(topic, "aborted", 4, false); // offsets 4-7, abort marker 8
    const monitor = new LagMonitor({ ...kafkaLagReaders(kafka), groupId, topics: [topic], intervalMs: 1000 });
    try {
      // Nothing committed: 3 data records wait (aborted records and markers do not). The abort
      // marker lands after abort() returns; until then the last stable offset stays at 4.
      const before = await sampleUntil(monitor, (s) => s.partitions[0]?.endOffset === "9");
      expect(before.partitions[0]).toMatchObject({ endOffset: "9", lagRecords: 3 });
      await commitGroupOffsets(kafka, groupId, topic, [{ partition: 0, offset: "3" }]);
      const [first, second] = await twoSamplesAt(monitor, "3");
      for (const s of [first, second]) {
        expect(s.partitions[0]).toMatchObject({
          committedOffset: "3",
          endOffset: "9",
          lagRecords: 0,
          lagSeconds: 0,
        });
        expect(s.topics[0]).toMatchObject({ lagRecords: 0, timeToDrainSeconds: 0 });
      }
      // New committed data after the aborted transaction is real lag again, counted exactly.
      await produceInTransaction(topic, "late", 2, true); // offsets 9-10, marker 11
      const after = await sampleUntil(monitor, (s) => s.partitions[0]!.endOffset === "12");
      expect(after.partitions[0]).toMatchObject({ committedOffset: "3", lagRecords: 2 });
      expect(after.partitions[0]!.lagSeconds).toBeGreaterThanOrEqual(0);
      expect(after.partitions[0]!.lagSeconds).toBeLessThan(120);
      const status = await readGroupStatus({ ...kafkaLagReaders(kafka), groupId, topics: [topic] });
      expect(status.partitions[0]).toMatchObject({ lagRecords: 2 });
    } finally {
      await monitor.stop();
    }
  });
});
