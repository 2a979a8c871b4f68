import { describe, expect, it } from "vitest";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import { PartitionTask, type TaskCommitter } from "../../../src/processor/partition-task.js";

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
const done: RecordCompletion = { outputs: [], changelog: [], outcome: "duplicate", recordTimestampMs: 0 };

describe("PartitionTask", () => {
  it("checks its transitions and bumps the generation on each", () => {
    const t = new PartitionTask({ topic: "t", partition: 1 }, "cl");
    expect(t.state).toBe("restoring");
    expect(() => t.start(new Deduplicator(), "0")).toThrow(/without a committer/);
    t.installCommitter(committer());
    const g0 = t.generation;
    t.start(new Deduplicator(), "5");
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
    t.start(new Deduplicator(), "10");
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
    const running = new PartitionTask({ topic: "t", partition: 0 }, "cl");
    const a = committer();
    running.installCommitter(a);
    running.start(new Deduplicator(), "0");
    await running.closeClean();
    expect(a.closed).toEqual([{ commit: true }]);
    const restoring = new PartitionTask({ topic: "t", partition: 1 }, "cl");
    const b = committer();
    restoring.installCommitter(b);
    await restoring.closeClean();
    expect(b.closed).toEqual([{ commit: false }]);
    const dirty = new PartitionTask({ topic: "t", partition: 2 }, "cl");
    const d = committer();
    dirty.installCommitter(d);
    dirty.start(new Deduplicator(), "0");
    await dirty.closeDirty();
    expect(d.closed).toEqual([{ commit: false }]);
    expect(dirty.state).toBe("closed");
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
    expect(t.fenced()).toBe(1);
    expect(t.fenced()).toBe(2);
    t.committed();
    expect(t.fences).toBe(0);
  });
});
