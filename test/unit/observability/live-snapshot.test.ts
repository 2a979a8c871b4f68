import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { type AssignedPartition, LiveSnapshot } from "../../../src/observability/live-snapshot.js";
import { SluiceMetrics } from "../../../src/observability/metrics.js";
import { emitCommitted } from "../../support/sluice-events-fixtures.js";

const NOW = 1_800_000_000_000;

function setup() {
  const events = new SluiceEvents();
  const metrics = new SluiceMetrics({
    collectDefaultMetrics: false,
    backfillTopics: ["bf"],
    nowMs: () => NOW,
  });
  metrics.attach(events);
  const assignment: AssignedPartition[] = [{ topic: "req", partition: 0, lane: "online", phase: "ready" }];
  const snapshot = new LiveSnapshot({
    registry: metrics.registry,
    instanceId: "i-1",
    assignment: () => assignment,
    nowMs: () => NOW,
  });
  return { events, metrics, snapshot };
}

const outcome = (topic: string, endToEndMs: number, extra: Record<string, unknown> = {}) => ({
  topic,
  partition: 0,
  outcome: "result" as const,
  status: "ok" as const,
  endToEndMs,
  ...extra,
});

describe("LiveSnapshot", () => {
  it("reads the page's values from the metrics registry: lanes, latency buckets, lag, freshness, assignment", async () => {
    const { events, snapshot } = setup();
    events.emit("record.outcome", outcome("req", 20));
    events.emit("record.outcome", outcome("req", 300));
    events.emit("record.outcome", outcome("bf", 5000));
    events.emit("record.outcome", { ...outcome("req", 1), outcome: "duplicate", status: undefined });
    events.emit("record.outcome", {
      ...outcome("req", 5),
      outcome: "dead_letter",
      status: undefined,
      deadLetter: { offset: "3", stage: "decode" },
    });
    events.emit("record.outcome", outcome("req", 40, { status: "fallback", fallbackReason: "deadline" }));
    events.emit("microbatch.inferred", {
      lane: "backfill",
      size: 4,
      inferenceMs: 250,
      realTokens: 10,
      paddedTokens: 12,
      expired: 0,
      failed: 0,
      cpuMs: 250,
    });
    events.emit("lag.sampled", {
      groupId: "g",
      sampledAtMs: NOW,
      partitions: [
        { topic: "req", partition: 0, committedOffset: "5", endOffset: "9", lagRecords: 4, lagSeconds: 2 },
        { topic: "req", partition: 1, committedOffset: "5", endOffset: "6", lagRecords: 1, lagSeconds: 3 },
      ],
      topics: [{ topic: "req", lagRecords: 5, throughputRecordsPerSecond: 0, timeToDrainSeconds: Infinity }],
    });
    emitCommitted(events, { topic: "req", partition: 1, nextOffset: 6, lastEventTimestampMs: NOW - 4000 });

    const s = await snapshot.build();
    expect(s.at).toBe(NOW);
    expect(s.instanceId).toBe("i-1");
    expect(s.results).toEqual({ online: 3, backfill: 1 });
    expect(s.deadLetters).toEqual({ online: 1 });
    expect(s.fallbacks).toBe(1);
    // SluiceMetrics counts model CPU (sluice_model_cpu_seconds_total), so the page shows it.
    expect(s.modelSecondsSource).toBe("cpu");
    expect(s.modelSeconds).toEqual({ online: 0, backfill: 0.25 });
    // Online lane, duplicates excluded: 20 ms, 300 ms, 5 ms (dead letter), 40 ms; the last bound is +Inf (-1).
    const buckets = new Map(s.onlineLatencyBuckets);
    expect(buckets.get(0.025)).toBe(2);
    expect(buckets.get(0.05)).toBe(3);
    expect(buckets.get(0.5)).toBe(4);
    expect(buckets.get(-1)).toBe(4);
    expect(s.onlineTargetSeconds).toBeNull();
    expect(s.onlineEstimateSeconds).toBeNull();
    expect(s.backfillAllowance).toBeNull();
    expect(s.backfillCpuHeadroom).toBeNull();
    // Infinite time to drain is sent as null (JSON has no Infinity).
    expect(s.topics.req).toEqual({ lagRecords: 5, lagSeconds: 3, timeToDrainSeconds: null });
    expect(s.freshness).toEqual({ "req/1": 4 });
    expect(s.assignment).toEqual([{ topic: "req", partition: 0, lane: "online", phase: "ready" }]);
    expect(s.runs).toBeNull();
    expect(JSON.parse(JSON.stringify(s))).toEqual(s);
  });

  it("uses the SLO guard's gauges and the model CPU counter when the registry has them", async () => {
    const { events, snapshot } = setup();
    // The guard's gauges exist once it has decided (guard.adjusted), as in serve with a backfill lane.
    events.emit("guard.adjusted", {
      allowance: 0.5,
      estimateMs: 150,
      targetMs: 200,
      backfillModelShare: 0.4,
      cpuHeadroomShare: 1,
    });
    // Model CPU reaches sluice_model_cpu_seconds_total through the events, as in serve.
    const inferred = (lane: "online" | "backfill", cpuMs: number) => ({
      lane,
      size: 1,
      inferenceMs: 10,
      realTokens: 5,
      paddedTokens: 5,
      expired: 0,
      failed: 0,
      cpuMs,
    });
    events.emit("microbatch.inferred", inferred("online", 1500));
    events.emit("microbatch.inferred", inferred("backfill", 4000));
    const s = await snapshot.build();
    expect(s.onlineTargetSeconds).toBe(0.2);
    expect(s.onlineEstimateSeconds).toBe(0.15);
    expect(s.backfillAllowance).toBe(0.5);
    expect(s.backfillCpuHeadroom).toBe(1);
    expect(s.modelSecondsSource).toBe("cpu");
    expect(s.modelSeconds).toEqual({ online: 1.5, backfill: 4 });
  });
});
