import { describe, expect, it } from "vitest";
import type { LaneBatch } from "../../../src/microbatch/lane-batcher.js";
import { LaneDispatcher } from "../../../src/processor/lane-dispatcher.js";
import type { WorkItem } from "../../../src/processor/request-intake.js";
import { FakeClock } from "../../support/fake-clock.js";

/** Only what the dispatcher reads of a work item. */
const item = (lane: "online" | "backfill", timestampMs: number): WorkItem =>
  ({ lane, timestampMs, tokens: 1, deadlineMs: null, span: { abort() {} } }) as unknown as WorkItem;

describe("LaneDispatcher.oldestOnlineTimestampMs: the SLO guard's in-flight evidence", () => {
  it("is the oldest online record held, queued or in a batch at the model; backfill items do not count", async () => {
    const clock = new FakeClock();
    const finish: Array<() => void> = [];
    const dispatcher = new LaneDispatcher({
      settings: { maxBatchSize: 1, maxBatchTokens: 1000, maxWaitMs: 5, maxInFlightBatches: 1 },
      clock,
      emitFlushed: () => {},
      run: (_batch: LaneBatch<WorkItem>) => new Promise<void>((resolve) => finish.push(resolve)),
      onError: (error) => {
        throw error;
      },
    });
    expect(dispatcher.oldestOnlineTimestampMs()).toBeUndefined();
    dispatcher.add(item("backfill", 100));
    dispatcher.add(item("online", 500)); // forms a batch at once (size 1) and is at the model
    dispatcher.add(item("online", 300)); // queued behind it: its one slot is taken
    expect(dispatcher.oldestOnlineTimestampMs()).toBe(300);
    // The batch at the model finishes; the queued one goes to the model next.
    finish.shift()?.();
    await new Promise((r) => setImmediate(r));
    expect(dispatcher.oldestOnlineTimestampMs()).toBe(300);
    while (finish.length > 0) {
      finish.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(dispatcher.oldestOnlineTimestampMs()).toBeUndefined();
    dispatcher.close();
  });
});
