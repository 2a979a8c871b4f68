import { describe, expect, it } from "vitest";
import { newRunManifest, type RunManifest } from "../../../src/backfill/run-manifest.js";
import { BackfillRunBoard, runProgress } from "../../../src/observability/backfill-run-board.js";
import type {
  GroupOffsetsReader,
  PartitionOffsets,
} from "../../../src/observability/group-offsets-reader.js";

function manifest(over: Partial<RunManifest> = {}): RunManifest {
  const m = newRunManifest({
    runId: "r1",
    sluice: { version: "0.1.0", gitCommit: null },
    input: { kind: "file", uri: "file:///in.jsonl", sha256: "x", bytes: 1, rows: 100 },
    topics: { backfill: "bf", results: "res", deadLetters: "dlq" },
    model: { name: "m", expectedVersion: null },
    config: {},
    configHash: "h",
  } as unknown as Parameters<typeof newRunManifest>[0]);
  return {
    ...m,
    status: "submitted",
    rowsRead: 100,
    rowsSubmitted: 98,
    rowsInvalid: 2,
    partitions: [
      { partition: 0, startOffset: "10", endOffset: "61", records: 50 },
      { partition: 1, startOffset: "0", endOffset: "50", records: 48 },
    ],
    ...over,
  };
}

const at = (partition: number, committedOffset: string | null): PartitionOffsets => ({
  topic: "bf",
  partition,
  logStartOffset: "0",
  logEndOffset: "100",
  committedOffset,
});

describe("runProgress", () => {
  it("counts a partition's rows as done once the group's offset passes the run's end there, else the offsets passed", () => {
    const m = manifest();
    expect(runProgress(m, [])).toBe(0);
    expect(runProgress(m, [at(0, null), at(1, "0")])).toBe(0);
    expect(runProgress(m, [at(0, "30"), at(1, "0")])).toBe(20);
    // Offsets past the start are capped at the partition's records (markers and other runs' records).
    expect(runProgress(m, [at(0, "60"), at(1, "49")])).toBe(50 + 48);
    expect(runProgress(m, [at(0, "61"), at(1, "50")])).toBe(98);
    // Another topic's offsets do not count.
    expect(runProgress(m, [{ ...at(0, "61"), topic: "other" }])).toBe(0);
  });
});

describe("BackfillRunBoard", () => {
  function board(offsets: PartitionOffsets[], manifests: RunManifest[] = [manifest()]) {
    let now = 1_000_000;
    let reads = 0;
    const reader: GroupOffsetsReader = {
      partitionOffsets: async (groupId, topics) => {
        expect(groupId).toBe("serve-group");
        expect(topics).toEqual(["bf"]);
        reads++;
        return offsets;
      },
      committedTopics: async () => [],
      close: async () => {},
    };
    const b = new BackfillRunBoard({
      source: { manifests: async () => manifests },
      offsets: reader,
      groupId: "serve-group",
      cacheMs: 2000,
      nowMs: () => now,
    });
    return { b, tick: (ms: number) => (now += ms), reads: () => reads };
  }

  it("lists runs with rows done, rate and ETA from two looks, and serves a recent view from cache", async () => {
    const offsets = [at(0, "20"), at(1, "0")];
    const { b, tick, reads } = board(offsets);
    const first = await b.view();
    expect(first.runs).toEqual([
      {
        runId: "r1",
        state: "running",
        rowsDone: 10 + 2, // 10 offsets of partition 0, and the 2 rows refused at submit
        rowsTotal: 100,
        rowsSubmitted: 98,
        rowsInvalid: 2,
        rowsPerSec: null,
        etaSeconds: null,
        updatedAt: first.runs[0]?.updatedAt,
      },
    ]);
    tick(1000);
    expect(await b.view()).toBe(first); // cached: no broker read
    expect(reads()).toBe(1);
    offsets[0] = at(0, "40");
    tick(1000);
    const second = await b.view();
    expect(reads()).toBe(2);
    expect(second.runs[0]?.rowsDone).toBe(32);
    expect(second.runs[0]?.rowsPerSec).toBe(10); // 20 rows in 2 s
    expect(second.runs[0]?.etaSeconds).toBe(7); // 68 rows left at 10 rows/s
    offsets[0] = at(0, "61");
    offsets[1] = at(1, "50");
    tick(3000);
    const done = await b.view();
    expect(done.runs[0]).toMatchObject({ state: "done", rowsDone: 100, etaSeconds: 0 });
  });

  it("keeps the last rows and says why when the runs cannot be read", async () => {
    let failing = false;
    const b = new BackfillRunBoard({
      source: {
        manifests: async () => {
          if (failing) throw new Error("TOPIC_AUTHORIZATION_FAILED on sluice.runs");
          return [manifest()];
        },
      },
      offsets: { partitionOffsets: async () => [], committedTopics: async () => [], close: async () => {} },
      groupId: "g",
      cacheMs: 0,
    });
    expect((await b.view()).runs).toHaveLength(1);
    failing = true;
    const view = await b.view();
    expect(view.runs.map((r) => r.runId)).toEqual(["r1"]);
    expect(view.error).toContain("TOPIC_AUTHORIZATION_FAILED");
  });

  it("answers within waitMs while a read is slow, and the read's result serves the next look", async () => {
    let release: (manifests: RunManifest[]) => void = () => {};
    const b = new BackfillRunBoard({
      source: { manifests: () => new Promise((resolve) => (release = resolve)) },
      offsets: { partitionOffsets: async () => [], committedTopics: async () => [], close: async () => {} },
      groupId: "g",
      waitMs: 20,
    });
    const first = await b.view();
    expect(first.runs).toEqual([]);
    expect(first.error).toMatch(/not read yet/);
    release([manifest()]);
    await new Promise((r) => setTimeout(r, 10));
    expect((await b.view()).runs.map((r) => r.runId)).toEqual(["r1"]);
  });
});
