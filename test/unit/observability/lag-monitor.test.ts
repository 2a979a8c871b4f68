import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { InFlightRecords } from "../../../src/observability/in-flight-records.js";
import { LagMonitor } from "../../../src/observability/lag-monitor.js";
import { type FakeBroker, fakeLagPorts } from "./fake-lag-ports.js";

/** Partition `p` of topic "req" at end offset `ends[p]` with the group at `committed[p]`. */
function fakeBroker(ends: Record<number, number>, committed: Record<number, number>) {
  const partitions: FakeBroker[string] = {};
  for (const [p, end] of Object.entries(ends))
    partitions[Number(p)] = { end, committed: committed[Number(p)] };
  return { broker: { req: partitions } as FakeBroker, partitions };
}

describe("LagMonitor throughput and time to drain", () => {
  it("a partition joining the owned set is not counted as throughput", async () => {
    const { broker, partitions } = fakeBroker({ 0: 1100, 1: 1_000_100 }, { 0: 1000, 1: 1_000_000 });
    const events = new SluiceEvents();
    const inFlight = new InFlightRecords(events);
    let now = 0;
    const monitor = new LagMonitor({
      ...fakeLagPorts(broker),
      intervalMs: 5000,
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
    partitions[0]!.committed = 1050;
    events.emit("partitions.assigned", { topic: "req", partitions: [1] });
    const s = await monitor.sample();
    expect(s.partitions.map((p) => p.partition)).toEqual([0, 1]);
    const t = s.topics[0]!;
    expect(t.throughputRecordsPerSecond).toBeCloseTo(5, 6); // 50 records / 10 s, not 1e5/s
    expect(t.lagRecords).toBe(50 + 100);
    expect(t.timeToDrainSeconds).toBeCloseTo(150 / 5, 6);
    // Losing a partition does not count as negative progress either.
    now = 20_000;
    partitions[0]!.committed = 1100;
    events.emit("partitions.revoked", { topic: "req", partitions: [1] });
    const s2 = await monitor.sample();
    expect(s2.topics[0]!.throughputRecordsPerSecond).toBeCloseTo(0.5 * 5 + 0.5 * 5, 6);
    expect(s2.topics[0]!.timeToDrainSeconds).toBe(0);
    await monitor.stop();
  });

  it("no progress with lag: time to drain is +Inf; a first commit counts from the log start", async () => {
    const { broker, partitions } = fakeBroker({ 0: 40 }, {});
    let now = 0;
    const monitor = new LagMonitor({
      ...fakeLagPorts(broker),
      intervalMs: 5000,
      groupId: "g",
      topics: ["req"],
      readLagSeconds: false,
      nowMs: () => now,
    });
    const first = await monitor.sample();
    expect(first.topics[0]).toMatchObject({ lagRecords: 40, throughputRecordsPerSecond: 0 });
    expect(first.topics[0]!.timeToDrainSeconds).toBe(Number.POSITIVE_INFINITY);
    now = 2000;
    partitions[0]!.committed = 20;
    const second = await monitor.sample();
    expect(second.topics[0]!.throughputRecordsPerSecond).toBeCloseTo(10, 6); // 20 records in 2 s
    expect(second.topics[0]!.timeToDrainSeconds).toBeCloseTo(2, 6);
    await monitor.stop();
  });
});
