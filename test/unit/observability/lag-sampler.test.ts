import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { InFlightRecords } from "../../../src/observability/in-flight-records.js";
import {
  EXACT_COUNT_OFFSETS,
  LagSampler,
  type LagSamplerOptions,
  LOOK_BEHIND_RECORDS,
} from "../../../src/observability/lag-sampler.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { type FakeBroker, type FakePartition, fakeLagPorts, type LogEntry } from "./fake-lag-ports.js";

const NOW = 1_000_000;

/** A sampler of group "g" on topic "t" over `partitions`, clock at NOW. */
function sampler(partitions: Record<number, FakePartition>, over: Partial<LagSamplerOptions> = {}) {
  const broker: FakeBroker = { t: partitions };
  const ports = fakeLagPorts(broker);
  const warnings: string[] = [];
  const errors: string[] = [];
  const logger = {
    warn: (_o: unknown, msg: string) => warnings.push(msg),
    error: (_o: unknown, msg: string) => errors.push(msg),
  } as unknown as LagSamplerOptions["logger"];
  const s = new LagSampler({
    ...ports,
    groupId: "g",
    topics: ["t"],
    probeTimeoutMs: 1000,
    nowMs: () => NOW,
    logger,
    ...over,
  });
  return { s, ...ports, warnings, errors };
}

/** Offsets `from..until-1` as data records `ageS` seconds old. */
function data(from: number, until: number, ageS: number): Record<number, LogEntry> {
  const log: Record<number, LogEntry> = {};
  for (let o = from; o < until; o++) log[o] = { timestampMs: NOW - ageS * 1000 };
  return log;
}

describe("LagSampler: lag counts data records, not offsets (docs/design.md §3)", () => {
  it("an idle topic whose last entry is a commit marker reads 0 records and 0 s", async () => {
    // Five records, their commit marker at 5; the group committed 5 (a read_committed consumer never
    // sees the marker), so end − committed is 1 forever.
    const { s } = sampler({ 0: { end: 6, committed: 5, log: { ...data(0, 5, 60), 5: "marker" } } });
    const { partitions } = await s.sample();
    expect(partitions[0]).toMatchObject({
      committedOffset: "5",
      endOffset: "6",
      lagRecords: 0,
      lagSeconds: 0,
    });
  });

  it("aborted records and markers after the commit are not lag; data among them is counted exactly", async () => {
    const log = {
      3: "marker",
      4: "aborted",
      5: "aborted",
      6: "marker",
      ...data(7, 9, 30),
      9: "marker",
    } as const;
    const { s } = sampler({ 0: { end: 10, committed: 3, log } });
    const { partitions } = await s.sample();
    expect(partitions[0]).toMatchObject({ lagRecords: 2 });
    expect(partitions[0]!.lagSeconds).toBeCloseTo(30, 6);
  });

  it("a backlog longer than EXACT_COUNT_OFFSETS counts from its first data record to the log end", async () => {
    const end = EXACT_COUNT_OFFSETS + 10;
    // Offsets 0..3 are markers/aborted; data from 4 on.
    const log: Record<number, LogEntry> = { 0: "aborted", 1: "aborted", 2: "marker", 3: "marker" };
    const { s, timestamps } = sampler({ 0: { end, committed: 0, log: { ...data(4, end, 90), ...log } } });
    const { partitions } = await s.sample();
    expect(timestamps.calls[0]![0]).toMatchObject({ countDataRecords: false });
    expect(partitions[0]!.lagRecords).toBe(end - 4);
    expect(partitions[0]!.lagSeconds).toBeCloseTo(90, 6);
  });

  it("no commit yet: the log start stands in for the commit", async () => {
    const { s } = sampler({ 0: { low: 10, end: 15, log: data(10, 15, 5) } });
    const { partitions } = await s.sample();
    expect(partitions[0]).toMatchObject({ committedOffset: null, lagRecords: 5 });
    expect(partitions[0]!.lagSeconds).toBeCloseTo(5, 6);
  });

  it("a commit below the log start (retention deleted records) is read from the log start", async () => {
    const { s, timestamps } = sampler({ 0: { low: 20, end: 25, committed: 12, log: data(20, 25, 7) } });
    const { partitions } = await s.sample();
    expect(timestamps.calls[0]![0]).toMatchObject({ offset: "20", untilOffset: "25" });
    expect(partitions[0]!.lagSeconds).toBeCloseTo(7, 6);
  });
});

describe("LagSampler: reads and their cache", () => {
  it("a stuck partition is read once per committed offset; a moved end re-counts", async () => {
    const p: FakePartition = { end: 8, committed: 5, log: data(0, 20, 10) };
    const { s, timestamps } = sampler({ 0: p });
    expect((await s.sample()).partitions[0]!.lagRecords).toBe(3);
    expect((await s.sample()).partitions[0]!.lagRecords).toBe(3);
    expect(timestamps.calls).toHaveLength(1);
    p.end = 12;
    expect((await s.sample()).partitions[0]!.lagRecords).toBe(7);
    expect(timestamps.calls).toHaveLength(2);
    p.committed = 12;
    expect((await s.sample()).partitions[0]).toMatchObject({ lagRecords: 0, lagSeconds: 0 });
    expect(timestamps.calls).toHaveLength(2); // caught up: nothing to read
  });

  it("an unanswered or failed read keeps end − committed and shows lag seconds as NaN, never 0", async () => {
    const { s, timestamps, warnings } = sampler({ 0: { end: 9, committed: 4 } });
    timestamps.unanswered = true; // the read timed out before the partition answered
    let { partitions } = await s.sample();
    expect(partitions[0]!.lagRecords).toBe(5);
    expect(partitions[0]!.lagSeconds).toBeNaN();
    timestamps.unanswered = false;
    timestamps.fail = new SluiceError("BROKER_UNAVAILABLE", "broker down", { retriable: true });
    ({ partitions } = await s.sample());
    expect(partitions[0]!.lagRecords).toBe(5);
    expect(partitions[0]!.lagSeconds).toBeNaN();
    expect(warnings).toEqual(["could not read record timestamps for lag seconds"]);
    timestamps.fail = undefined; // a transient failure is asked again next time
    ({ partitions } = await s.sample());
    expect(partitions[0]!.lagSeconds).toBe(NOW / 1000); // unlisted fake records are stamped 0
    expect(timestamps.calls).toHaveLength(3);
  });

  it("a refused read (ACL) is logged once and not asked again; offsets are still reported", async () => {
    const { s, timestamps, errors, warnings } = sampler({ 0: { end: 9, committed: 4 } });
    timestamps.fail = new SluiceError("AUTHORIZATION_FAILED", "denied READ on GROUP prefix");
    await s.sample();
    const again = await s.sample();
    expect(timestamps.calls).toHaveLength(1);
    expect(errors).toHaveLength(1);
    expect(warnings).toHaveLength(0);
    expect(again.partitions[0]!.lagRecords).toBe(5);
    expect(again.partitions[0]!.lagSeconds).toBeNaN();
  });

  it("readCommittedTimestamps looks LOOK_BEHIND_RECORDS back for the last committed data record", async () => {
    const log = { ...data(0, 40, 100), 38: "marker", 39: "marker" } as const;
    const { s, timestamps } = sampler(
      { 0: { end: 40, committed: 40, log } },
      { readCommittedTimestamps: true },
    );
    const { partitions } = await s.sample();
    expect(timestamps.calls[0]![0]).toMatchObject({
      fromOffset: String(40 - LOOK_BEHIND_RECORDS),
      offset: "40",
      untilOffset: "40",
    });
    expect(partitions[0]).toMatchObject({ lagRecords: 0, lastCommittedEventTimestampMs: NOW - 100_000 });
  });

  it("owned partitions take lag seconds from in-flight records (exact offset match only), without a read", async () => {
    const events = new SluiceEvents();
    const inFlight = new InFlightRecords(events);
    const { s, timestamps } = sampler(
      { 0: { end: 10, committed: 4, log: data(0, 10, 3600) }, 1: { end: 5, committed: 0 } },
      { inFlight, ownedPartitionsOnly: true },
    );
    events.emit("partitions.assigned", { topic: "t", partitions: [0] });
    events.emit("record.consumed", { topic: "t", partition: 0, offset: "4", timestampMs: NOW - 2000 });
    const { partitions } = await s.sample();
    expect(partitions.map((p) => p.partition)).toEqual([0]); // partition 1 is not ours
    expect(partitions[0]).toMatchObject({ lagRecords: 6, lagSeconds: 2 });
    expect(timestamps.calls).toHaveLength(0);
    inFlight.detach();
  });

  it("rejects options that cannot work", () => {
    const ports = fakeLagPorts({});
    const base = { ...ports, groupId: "g", topics: ["t"], probeTimeoutMs: 1000 };
    expect(() => new LagSampler({ ...base, groupId: "" })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
    expect(() => new LagSampler({ ...base, topics: [] })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
    expect(() => new LagSampler({ ...base, probeTimeoutMs: 0 })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
    expect(() => new LagSampler({ ...base, ownedPartitionsOnly: true })).toThrow(
      expect.objectContaining({ code: "CONFIG_INVALID" }),
    );
  });
});
