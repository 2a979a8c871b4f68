import { describe, expect, it } from "vitest";
import type { PartitionLag } from "../../../src/events/sluice-events.js";
import { THROUGHPUT_SMOOTHING, TopicThroughput } from "../../../src/observability/topic-throughput.js";

function lag(topic: string, partition: number, committed: number | null, end: number): PartitionLag {
  const position = committed ?? 0;
  return {
    topic,
    partition,
    committedOffset: committed === null ? null : String(committed),
    endOffset: String(end),
    lagRecords: Math.max(0, end - position),
    lagSeconds: 0,
  };
}

describe("TopicThroughput", () => {
  it("smooths the committed-offset advance per second exponentially", () => {
    const t = new TopicThroughput();
    expect(t.update([lag("a", 0, 0, 100)], 0)[0]).toMatchObject({
      lagRecords: 100,
      throughputRecordsPerSecond: 0,
      timeToDrainSeconds: Number.POSITIVE_INFINITY,
    });
    // 40 records in 2 s: the first measurement is taken as it is.
    expect(t.update([lag("a", 0, 40, 100)], 2000)[0]!.throughputRecordsPerSecond).toBeCloseTo(20, 9);
    // 10 records in 2 s (5/s): α·5 + (1 − α)·20.
    const third = t.update([lag("a", 0, 50, 100)], 4000)[0]!;
    const expected = THROUGHPUT_SMOOTHING * 5 + (1 - THROUGHPUT_SMOOTHING) * 20;
    expect(third.throughputRecordsPerSecond).toBeCloseTo(expected, 9);
    expect(third.timeToDrainSeconds).toBeCloseTo(50 / expected, 9);
  });

  it("keeps topics apart, and reads 0 s to drain with no lag whatever the throughput", () => {
    const t = new TopicThroughput();
    t.update([lag("a", 0, 0, 10), lag("b", 0, 0, 0)], 0);
    const [a, b] = t.update([lag("a", 0, 10, 10), lag("b", 0, 0, 0)], 1000);
    expect(a).toMatchObject({ topic: "a", lagRecords: 0, timeToDrainSeconds: 0 });
    expect(a!.throughputRecordsPerSecond).toBeCloseTo(10, 9);
    expect(b).toMatchObject({
      topic: "b",
      lagRecords: 0,
      throughputRecordsPerSecond: 0,
      timeToDrainSeconds: 0,
    });
  });

  it("before a commit the position is the log start (end − lag); a reading at the same instant changes nothing", () => {
    const t = new TopicThroughput();
    t.update([lag("a", 0, null, 30)], 1000);
    t.update([lag("a", 0, 10, 30)], 1000); // no time passed: no rate
    expect(t.update([lag("a", 0, 20, 30)], 2000)[0]!.throughputRecordsPerSecond).toBeCloseTo(10, 9);
  });
});
