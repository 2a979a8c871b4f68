import { describe, expect, it } from "vitest";
import { parseOffsetSpec, resolveRanges, splitRangeSpec } from "../../../src/runs/offset-spec.js";

const bounds = [
  { partition: 1, low: "5", high: "50" },
  { partition: 0, low: "0", high: "100" },
];
const noTimestamps = async () => new Map<number, bigint>();

describe("offset specs", () => {
  it("parses defaults, keywords, offsets and timestamps", () => {
    expect(parseOffsetSpec(undefined, "--from")).toEqual({ kind: "earliest" });
    expect(parseOffsetSpec(null, "--to")).toEqual({ kind: "latest" });
    expect(parseOffsetSpec("0:100,1:7", "--from")).toEqual({
      kind: "offsets",
      offsets: new Map([
        [0, 100n],
        [1, 7n],
      ]),
    });
    expect(parseOffsetSpec("2026-11-30T00:00:00Z", "--to")).toEqual({
      kind: "timestamp",
      ms: Date.UTC(2026, 10, 30),
    });
    expect(() => parseOffsetSpec("0:1,0:2", "--from")).toThrow(/partition 0 twice/);
    expect(() => parseOffsetSpec("yesterday", "--to")).toThrow(/cannot read --to "yesterday"/);
  });

  it("resolves whole partitions by default, sorted by partition", async () => {
    const ranges = await resolveRanges(
      bounds,
      parseOffsetSpec(null, "--from"),
      parseOffsetSpec(null, "--to"),
      noTimestamps,
    );
    expect(ranges).toEqual([
      { partition: 0, startOffset: "0", endOffset: "100" },
      { partition: 1, startOffset: "5", endOffset: "50" },
    ]);
  });

  it("applies per-partition offsets, clamps to the log and never inverts a range", async () => {
    const ranges = await resolveRanges(
      bounds,
      parseOffsetSpec("0:10,1:0", "--from"),
      parseOffsetSpec("0:500,1:3", "--to"),
      noTimestamps,
    );
    expect(ranges).toEqual([
      { partition: 0, startOffset: "10", endOffset: "100" },
      { partition: 1, startOffset: "5", endOffset: "5" },
    ]);
  });

  it("reads only the partitions named by offsets", async () => {
    const ranges = await resolveRanges(
      bounds,
      parseOffsetSpec("1:7", "--from"),
      parseOffsetSpec(null, "--to"),
      noTimestamps,
    );
    expect(ranges).toEqual([{ partition: 1, startOffset: "7", endOffset: "50" }]);
  });

  it("maps timestamps through the broker lookup", async () => {
    const lookup = async (ms: number) =>
      ms === 1000
        ? new Map([
            [0, 20n],
            [1, 30n],
          ])
        : new Map([
            [0, 60n],
            [1, 40n],
          ]);
    const ranges = await resolveRanges(
      bounds,
      { kind: "timestamp", ms: 1000 },
      { kind: "timestamp", ms: 2000 },
      lookup,
    );
    expect(ranges).toEqual([
      { partition: 0, startOffset: "20", endOffset: "60" },
      { partition: 1, startOffset: "30", endOffset: "40" },
    ]);
  });

  it("rejects partitions the topic does not have", async () => {
    await expect(
      resolveRanges(bounds, parseOffsetSpec("7:1", "--from"), parseOffsetSpec(null, "--to"), noTimestamps),
    ).rejects.toThrow(/partition 7 does not exist; the topic has partitions 0, 1/);
  });
});

describe("--range", () => {
  it("splits partition ranges into --from/--to specs", () => {
    expect(splitRangeSpec("0:100-0:500")).toEqual({ from: "0:100", to: "0:500" });
    expect(splitRangeSpec("0:100-500, 1:0-1:50")).toEqual({ from: "0:100,1:0", to: "0:500,1:50" });
  });

  it("rejects ranges that switch partitions or are malformed", () => {
    expect(() => splitRangeSpec("0:100-1:500")).toThrow(/PARTITION:START-PARTITION:END/);
    expect(() => splitRangeSpec("0:100")).toThrow(/cannot read --range/);
  });
});
