import { describe, expect, it } from "vitest";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import { fencedReclaimDelayMs, PartitionTask } from "../../../src/processor/partition-task.js";
import type { TaskCommitter } from "../../../src/processor/processor-ports.js";

const committer = (): TaskCommitter & { tracked: string[]; closed: { commit: boolean }[] } => {
  const c = {
    tracked: [] as string[],
    closed: [] as { commit: boolean }[],
    pendingRecords: 0,
    track: (o: string) => c.tracked.push(o),
    complete: () => {},
    commitSoon: () => {},
    flush: async () => {},
    close: async (options: { commit: boolean }) => {
      c.closed.push(options);
    },
  };
  return c;
};

const rec = (offset: number) => ({ offset: String(offset), value: null, timestamp: "0" });
const done: RecordCompletion = { outputs: [], outcome: "duplicate", recordTimestampMs: 0 };

describe("PartitionTask", () => {
  it("checks its transitions and bumps the generation on each", () => {
    const t = new PartitionTask({ topic: "t", partition: 1 }, "cl");
    expect(t.state).toBe("restoring");
    expect(() => t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0")).toThrow(
      /without a committer/,
    );
    t.installCommitter(committer());
    const g0 = t.generation;
    t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "5");
    expect(t.state).toBe("running");
    expect(t.generation).toBe(g0 + 1);
    expect(t.isCurrent(t.generation)).toBe(true);
    t.reset();
    expect(t.state).toBe("restoring");
    expect(t.isCurrent(g0 + 1)).toBe(false);
    t.revoke();
    expect(t.state).toBe("revoked");
    expect(() => t.reset()).toThrow(/illegal transition revoked → restoring/);
  });

  it("accepts new records once, re-seeks stale fetches a bounded number of times, and voids old work", () => {
    const t = new PartitionTask({ topic: "t", partition: 0 }, "cl");
    const c = committer();
    t.installCommitter(c);
    t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "10");
    // A fetch from before our seek (it starts above the restored offset): re-seek, up to 3 times.
    expect(t.accept([rec(12)], "12")).toEqual({ kind: "reseek", offset: "10" });
    expect(t.accept([rec(10), rec(11)], "10")).toMatchObject({
      kind: "accepted",
      records: [rec(10), rec(11)],
    });
    // A redelivery of what was already taken is skipped.
    expect(t.accept([rec(11), rec(12)], "11")).toMatchObject({ kind: "accepted", records: [rec(12)] });
    expect(c.tracked).toEqual(["10", "11", "12"]);
    expect(t.pendingRecords).toBe(3);
    const g = t.generation;
    expect(t.complete(g, "10", done)).toBe(true);
    expect(t.pendingRecords).toBe(2);
    t.reset();
    expect(c.closed).toEqual([{ commit: false }]);
    expect(t.complete(g, "11", done)).toBe(false);
    expect(t.accept([rec(13)], "13")).toEqual({ kind: "refused" });
  });

  it("closeClean commits only a running task; closeDirty never commits", async () => {
    const task = (partition: number, running: boolean) => {
      const t = new PartitionTask({ topic: "t", partition }, "cl");
      const c = committer();
      t.installCommitter(c);
      if (running) t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0");
      return { t, c };
    };
    const running = task(0, true);
    await running.t.closeClean();
    expect(running.c.closed).toEqual([{ commit: true }]);
    const restoring = task(1, false);
    await restoring.t.closeClean();
    expect(restoring.c.closed).toEqual([{ commit: false }]);
    const dirty = task(2, true);
    await dirty.t.closeDirty();
    expect(dirty.c.closed).toEqual([{ commit: false }]);
    expect(dirty.t.state).toBe("closed");
  });

  it("keeps one pending reclaim and counts fences until a commit", async () => {
    const t = new PartitionTask({ topic: "t", partition: 0 }, "cl");
    let fired = 0;
    t.scheduleReclaim(5, () => fired++);
    t.scheduleReclaim(5, () => fired++);
    await new Promise((r) => setTimeout(r, 20));
    expect(fired).toBe(1);
    t.scheduleReclaim(50, () => fired++);
    expect(t.cancelReclaim()).toBe(true);
    expect(t.cancelReclaim()).toBe(false);
    let reclaimed = 0;
    let rebalancing = true;
    const timing = { heartbeatIntervalMs: 5, sessionTimeoutMs: 20 }; // the session caps the first wait
    t.reclaimAfterFence(
      timing,
      () => rebalancing,
      () => reclaimed++,
    );
    expect(t.fences).toBe(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(reclaimed).toBe(0); // held back while the group rebalances
    rebalancing = false;
    await new Promise((r) => setTimeout(r, 20));
    expect(reclaimed).toBe(1);
    t.reclaimAfterFence(
      timing,
      () => false,
      () => reclaimed++,
    );
    expect(t.fences).toBe(2);
    t.committed();
    expect(t.fences).toBe(0);
    t.cancelReclaim();
  });

  it("waits a few jittered heartbeats after a fence, a full session after repeated fences", () => {
    expect(fencedReclaimDelayMs(1, 3000, 30_000, () => 0)).toBe(6500);
    expect(fencedReclaimDelayMs(2, 3000, 30_000, () => 0.999)).toBe(9497);
    expect(fencedReclaimDelayMs(3, 3000, 30_000, () => 0)).toBe(30_000);
    expect(fencedReclaimDelayMs(1, 3000, 5000, () => 0)).toBe(5000);
  });
});
