import { afterEach, describe, expect, it, vi } from "vitest";
import { type LagSample, SluiceEvents } from "../../../src/events/sluice-events.js";
import { LagMonitor } from "../../../src/observability/lag-monitor.js";
import { TIMESTAMP_READ_TIMEOUT_MS } from "../../../src/observability/lag-sampler.js";
import { fakeLagPorts } from "./fake-lag-ports.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("LagMonitor with fake ports", () => {
  it("samples now and every intervalMs, emits lag.sampled, and stop() closes the offsets reader", async () => {
    vi.useFakeTimers();
    const ports = fakeLagPorts({ t: { 0: { end: 3, committed: 3 } } });
    const events = new SluiceEvents();
    const seen: LagSample[] = [];
    events.on("lag.sampled", (s) => seen.push(s));
    const monitor = new LagMonitor({ ...ports, groupId: "g", topics: ["t"], events, intervalMs: 1000 });
    monitor.start();
    await vi.advanceTimersByTimeAsync(2500);
    expect(seen).toHaveLength(3); // at 0, 1000 and 2000 ms
    expect(monitor.latest()).toBe(seen.at(-1));
    expect(seen[0]).toMatchObject({
      groupId: "g",
      partitions: [{ topic: "t", partition: 0, lagRecords: 0 }],
    });
    await monitor.stop();
    await monitor.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(seen).toHaveLength(3);
    expect(ports.offsets.closed).toBe(2);
  });

  it("concurrent sample() calls share one read; a timestamp read is capped at the interval", async () => {
    const ports = fakeLagPorts({ t: { 0: { end: 5, committed: 1 } } });
    const timeouts: number[] = [];
    const read = ports.timestamps.read.bind(ports.timestamps);
    ports.timestamps.read = (probes, timeoutMs) => {
      timeouts.push(timeoutMs);
      return read(probes, timeoutMs);
    };
    const fast = new LagMonitor({ ...ports, groupId: "g", topics: ["t"], intervalMs: 300 });
    const [a, b] = await Promise.all([fast.sample(), fast.sample()]);
    expect(a).toBe(b);
    expect(ports.timestamps.calls).toHaveLength(1);
    const slow = new LagMonitor({ ...ports, groupId: "g", topics: ["t"], intervalMs: 60_000 });
    await slow.sample();
    expect(timeouts).toEqual([300, TIMESTAMP_READ_TIMEOUT_MS]);
  });

  it("a failed sample is logged and the schedule goes on", async () => {
    vi.useFakeTimers();
    const ports = fakeLagPorts({ t: { 0: { end: 1, committed: 1 } } });
    let fail = true;
    const partitionOffsets = ports.offsets.partitionOffsets.bind(ports.offsets);
    ports.offsets.partitionOffsets = async (g, t) => {
      if (fail) throw new Error("broker down");
      return partitionOffsets(g, t);
    };
    const warnings: string[] = [];
    const logger = { warn: (_o: unknown, msg: string) => warnings.push(msg) };
    const monitor = new LagMonitor({
      ...ports,
      groupId: "g",
      topics: ["t"],
      intervalMs: 1000,
      logger: logger as never,
    });
    monitor.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(warnings).toEqual(["lag sample failed; will retry next interval"]);
    fail = false;
    await vi.advanceTimersByTimeAsync(1000);
    expect(monitor.latest()?.partitions[0]).toMatchObject({ lagRecords: 0 });
    await monitor.stop();
  });
});
