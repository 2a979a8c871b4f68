import type { Kafka } from "kafkajs";
import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { InFlightRecords } from "../../../src/observability/in-flight-records.js";
import { LagMonitor } from "../../../src/observability/lag-monitor.js";

/** Broker state the fake admin answers from; tests move it between samples. */
interface FakeBroker {
  ends: Record<number, number>;
  committed: Record<number, number>;
}

function fakeKafka(broker: FakeBroker): Kafka {
  const admin = {
    connect: async () => {},
    disconnect: async () => {},
    fetchTopicOffsets: async () =>
      Object.entries(broker.ends).map(([p, high]) => ({
        partition: Number(p),
        high: String(high),
        low: "0",
        offset: String(high),
      })),
    fetchOffsets: async ({ topics }: { topics: string[] }) =>
      topics.map((topic) => ({
        topic,
        partitions: Object.keys(broker.ends).map((p) => ({
          partition: Number(p),
          offset: String(broker.committed[Number(p)] ?? -1),
        })),
      })),
  };
  return { admin: () => admin } as unknown as Kafka;
}

describe("LagMonitor throughput and time to drain", () => {
  it("a partition joining the owned set is not counted as throughput", async () => {
    const broker: FakeBroker = { ends: { 0: 1100, 1: 1_000_100 }, committed: { 0: 1000, 1: 1_000_000 } };
    const events = new SluiceEvents();
    const inFlight = new InFlightRecords(events);
    let now = 0;
    const monitor = new LagMonitor({
      kafka: fakeKafka(broker),
      groupId: "g",
      topics: ["req"],
      inFlight,
      ownedPartitionsOnly: true,
      readLagSeconds: false,
      nowMs: () => now,
    });
    events.emit("partitions.assigned", { topic: "req", partitions: [0] });
    await monitor.sample();
    // 10 s later: partition 0 committed 50 more, and partition 1 (offset ~1e6) became ours.
    now = 10_000;
    broker.committed[0] = 1050;
    events.emit("partitions.assigned", { topic: "req", partitions: [1] });
    const s = await monitor.sample();
    expect(s.partitions.map((p) => p.partition)).toEqual([0, 1]);
    const t = s.topics[0]!;
    expect(t.throughputRecordsPerSecond).toBeCloseTo(5, 6); // 50 records / 10 s, not 1e5/s
    expect(t.lagRecords).toBe(50 + 100);
    expect(t.timeToDrainSeconds).toBeCloseTo(150 / 5, 6);
    // Losing a partition does not count as negative progress either.
    now = 20_000;
    broker.committed[0] = 1100;
    events.emit("partitions.revoked", { topic: "req", partitions: [1] });
    const s2 = await monitor.sample();
    expect(s2.topics[0]!.throughputRecordsPerSecond).toBeCloseTo(0.5 * 5 + 0.5 * 5, 6);
    expect(s2.topics[0]!.timeToDrainSeconds).toBe(0);
    await monitor.stop();
  });

  it("no progress with lag: time to drain is +Inf; a first commit counts from the log start", async () => {
    const broker: FakeBroker = { ends: { 0: 40 }, committed: {} };
    let now = 0;
    const monitor = new LagMonitor({
      kafka: fakeKafka(broker),
      groupId: "g",
      topics: ["req"],
      readLagSeconds: false,
      nowMs: () => now,
    });
    const first = await monitor.sample();
    expect(first.topics[0]).toMatchObject({ lagRecords: 40, throughputRecordsPerSecond: 0 });
    expect(first.topics[0]!.timeToDrainSeconds).toBe(Number.POSITIVE_INFINITY);
    now = 2000;
    broker.committed[0] = 20;
    const second = await monitor.sample();
    expect(second.topics[0]!.throughputRecordsPerSecond).toBeCloseTo(10, 6); // 20 records in 2 s
    expect(second.topics[0]!.timeToDrainSeconds).toBeCloseTo(2, 6);
    await monitor.stop();
  });
});
