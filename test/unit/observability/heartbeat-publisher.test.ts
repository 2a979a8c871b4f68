import { afterEach, describe, expect, it, vi } from "vitest";
import type { FreshnessHeartbeat as HeartbeatRecord } from "../../../src/contracts/freshness-heartbeat.js";
import { type PartitionLag, SluiceEvents } from "../../../src/events/sluice-events.js";
import { HeartbeatPublisher } from "../../../src/observability/heartbeat-publisher.js";
import type { HeartbeatSink } from "../../../src/observability/heartbeat-sink.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { emitCommitted } from "../../support/sluice-events-fixtures.js";

// snapshot() is pure bookkeeping over events (no I/O), so the sink is never touched here; the Kafka
// sink is covered against a real broker in test/integration/observability-heartbeat.test.ts.
const noSink: HeartbeatSink = {
  connect: async () => {},
  publish: async () => {},
  close: async () => {},
};

function setup() {
  let now = 100_000;
  const events = new SluiceEvents();
  const hb = new HeartbeatPublisher({
    sink: noSink,
    events,
    groupId: "g",
    instanceId: "i1",
    intervalMs: 5000,
    nowMs: () => now,
  });
  const lag = (partition: number, over: Partial<PartitionLag>, sampledAtMs = now) =>
    events.emit("lag.sampled", {
      groupId: "g",
      sampledAtMs,
      partitions: [
        {
          topic: "t",
          partition,
          committedOffset: "0",
          endOffset: "0",
          lagRecords: 0,
          lagSeconds: 0,
          ...over,
        },
      ],
      topics: [],
    });
  const commit = (partition: number, nextOffset: number, lastEventTimestampMs: number) =>
    emitCommitted(events, { topic: "t", partition, nextOffset, lastEventTimestampMs });
  return { events, hb, lag, commit, tick: (ms: number) => (now += ms), now: () => now };
}

describe("HeartbeatPublisher bookkeeping", () => {
  it("reports owned partitions only, with unknowns as -1/null until measured", () => {
    const { events, hb } = setup();
    expect(hb.snapshot()).toEqual([]);
    events.emit("partitions.assigned", { topic: "t", partitions: [1, 0] });
    const beats = hb.snapshot();
    expect(beats.map((b) => b.partition)).toEqual([0, 1]);
    expect(beats[0]).toMatchObject({
      instanceId: "i1",
      groupId: "g",
      committedOffset: -1,
      lastCommittedEventTimestampMs: null,
      lagRecords: -1,
      lagSeconds: -1,
      completeUpToMs: null,
    });
    events.emit("partitions.revoked", { topic: "t", partitions: [0] });
    expect(hb.snapshot().map((b) => b.partition)).toEqual([1]);
  });

  it("complete-up-to: last committed event while lagging, sample time once caught up, never backwards", () => {
    const { events, hb, lag, commit, tick, now } = setup();
    events.emit("partitions.assigned", { topic: "t", partitions: [0] });
    lag(0, { committedOffset: "5", endOffset: "9", lagRecords: 4, lagSeconds: 30 });
    commit(0, 7, 50_000);
    let [b] = hb.snapshot();
    expect(b).toMatchObject({
      committedOffset: 7,
      lastCommittedEventTimestampMs: 50_000,
      completeUpToMs: 50_000,
    });
    expect(b).toMatchObject({ lagRecords: 4, lagSeconds: 30 });

    // Our own commit reached the sampled end offset: caught up as of the sample.
    const sampledAt = now();
    commit(0, 9, 60_000);
    tick(1000);
    [b] = hb.snapshot();
    expect(b).toMatchObject({ committedOffset: 9, lagRecords: 0, lagSeconds: 0, completeUpToMs: sampledAt });

    // Idle input: each new caught-up sample moves T forward.
    tick(5000);
    lag(0, { committedOffset: "9", endOffset: "9" });
    [b] = hb.snapshot();
    expect(b!.completeUpToMs).toBe(now());

    // New records arrive and wait: T stays where it was (it never moves back to the last event time).
    const before = b!.completeUpToMs;
    lag(0, { committedOffset: "9", endOffset: "12", lagRecords: 3, lagSeconds: 2 });
    [b] = hb.snapshot();
    expect(b!.completeUpToMs).toBe(before);
    expect(b!.lagRecords).toBe(3);
  });

  it("ignores lag samples of other groups and rejects bad options", () => {
    const { events, hb } = setup();
    events.emit("partitions.assigned", { topic: "t", partitions: [0] });
    events.emit("lag.sampled", {
      groupId: "other",
      sampledAtMs: 1,
      partitions: [
        { topic: "t", partition: 0, committedOffset: "3", endOffset: "3", lagRecords: 0, lagSeconds: 0 },
      ],
      topics: [],
    });
    expect(hb.snapshot()[0]!.lagRecords).toBe(-1);
    expect(
      () => new HeartbeatPublisher({ sink: noSink, events, groupId: "g", instanceId: "i", intervalMs: 0 }),
    ).toThrow(expect.objectContaining({ code: "CONFIG_INVALID" }));
  });
});

/** A sink that keeps what it was given; `fail` makes the next publishes throw it. */
class RecordingSink implements HeartbeatSink {
  readonly published: HeartbeatRecord[][] = [];
  connects = 0;
  closes = 0;
  fail: Error | undefined;
  gate: Promise<void> | undefined;
  async connect(): Promise<void> {
    this.connects += 1;
  }
  async publish(beats: readonly HeartbeatRecord[]): Promise<void> {
    await this.gate;
    if (this.fail) throw this.fail;
    this.published.push([...beats]);
  }
  async close(): Promise<void> {
    this.closes += 1;
  }
}

describe("HeartbeatPublisher scheduling with a fake sink", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function scheduled(over: Partial<ConstructorParameters<typeof HeartbeatPublisher>[0]> = {}) {
    vi.useFakeTimers();
    const events = new SluiceEvents();
    const sink = new RecordingSink();
    const warnings: string[] = [];
    const hb = new HeartbeatPublisher({
      sink,
      events,
      groupId: "g",
      instanceId: "i1",
      intervalMs: 1000,
      nowMs: () => Date.now(),
      logger: { warn: (_o: unknown, msg: string) => warnings.push(msg) } as never,
      ...over,
    });
    events.emit("partitions.assigned", { topic: "t", partitions: [0, 1] });
    return { events, sink, hb, warnings };
  }

  it("connects the sink on start, publishes every interval, stops and closes the sink on stop", async () => {
    const { sink, hb } = scheduled();
    await hb.start();
    expect(sink.connects).toBe(1);
    await vi.advanceTimersByTimeAsync(2500);
    expect(sink.published).toHaveLength(3); // at 0, 1000 and 2000 ms
    expect(sink.published[0]!.map((b) => b.partition)).toEqual([0, 1]);
    expect(sink.published.map((beats) => beats[0]!.emittedAtMs)).toEqual(
      [0, 1000, 2000].map((d) => sink.published[0]![0]!.emittedAtMs + d),
    );
    await hb.stop();
    await hb.stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(sink.published).toHaveLength(3);
    expect(sink.closes).toBe(2);
  });

  it("stop() waits for a beat in flight", async () => {
    const { sink, hb } = scheduled();
    let release: () => void = () => {};
    sink.gate = new Promise((r) => {
      release = r;
    });
    await hb.start();
    let stopped = false;
    const stopping = hb.stop().then(() => {
      stopped = true;
    });
    await vi.advanceTimersByTimeAsync(10);
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(sink.published).toHaveLength(1);
  });

  it("a transient failure warns and the schedule goes on; an access failure stops it and is reported once", async () => {
    const refused: SluiceError[] = [];
    const { sink, hb, warnings } = scheduled({ onAccessFailure: (e) => refused.push(e) });
    sink.fail = new SluiceError("BROKER_UNAVAILABLE", "broker down", { retriable: true });
    await hb.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(warnings).toEqual(["freshness heartbeat failed; will retry next interval"]);
    sink.fail = undefined;
    await vi.advanceTimersByTimeAsync(1000);
    expect(sink.published).toHaveLength(1);
    sink.fail = new SluiceError("AUTHORIZATION_FAILED", "denied WRITE on TOPIC sluice.freshness");
    await vi.advanceTimersByTimeAsync(5000);
    expect(refused.map((e) => e.code)).toEqual(["AUTHORIZATION_FAILED"]);
    expect(warnings).toHaveLength(1);
    await hb.stop();
  });
});
