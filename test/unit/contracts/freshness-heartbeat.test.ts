import { describe, expect, it } from "vitest";
import {
  decodeHeartbeat,
  encodeHeartbeat,
  type FreshnessHeartbeat,
} from "../../../src/contracts/freshness-heartbeat.js";

describe("freshness heartbeat codec", () => {
  const hbs: FreshnessHeartbeat[] = [
    {
      instanceId: "sluice-1",
      groupId: "g",
      topic: "requests",
      partition: 2,
      committedOffset: 12345,
      lastCommittedEventTimestampMs: 1_750_000_000_000,
      lagRecords: 7,
      lagSeconds: 0.25,
      emittedAtMs: 1_750_000_000_500,
      completeUpToMs: 1_749_999_999_900,
    },
    {
      instanceId: "sluice-2",
      groupId: "g",
      topic: "requests",
      partition: 0,
      committedOffset: -1,
      lastCommittedEventTimestampMs: null,
      lagRecords: 0,
      lagSeconds: 0,
      emittedAtMs: 1,
      completeUpToMs: null,
    },
  ];
  it.each(hbs)("round-trips $instanceId", (hb) => {
    expect(decodeHeartbeat(encodeHeartbeat(hb))).toEqual(hb);
  });

  it("rejects a heartbeat with a missing field", () => {
    const { topic: _t, ...broken } = hbs[0]!;
    expect(() => encodeHeartbeat(broken as FreshnessHeartbeat)).toThrow();
  });

  it("rejects garbage bytes", () => {
    expect(() => decodeHeartbeat(Buffer.from([0xff, 0xff, 0xff]))).toThrow();
  });
});
