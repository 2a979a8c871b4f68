import { describe, expect, it } from "vitest";
import { LaneBackpressure } from "../../../src/processor/lane-backpressure.js";

describe("LaneBackpressure", () => {
  it("pauses backfill at half the bound and online at the bound; resumes online at half, backfill at a quarter", () => {
    const b = new LaneBackpressure(100, true);
    expect(b.onQueued(49)).toEqual([]);
    expect(b.onQueued(50)).toEqual(["backfill"]);
    expect(b.pausesLane("online")).toBe(false);
    expect(b.onQueued(99)).toEqual([]);
    expect(b.onQueued(100)).toEqual(["online"]);
    expect(b.onDrained(51)).toEqual([]);
    expect(b.onDrained(50)).toEqual(["online"]);
    expect(b.onDrained(26)).toEqual([]);
    expect(b.onDrained(25)).toEqual(["backfill"]);
    expect(b.paused).toBe(false);
  });

  it("a jump straight over the bound pauses both lanes at once", () => {
    const b = new LaneBackpressure(100, true);
    expect(b.onQueued(150)).toEqual(["backfill", "online"]);
    // Backfill stays paused until online runs again and the count is down to a quarter.
    expect(b.onDrained(10)).toEqual(["online", "backfill"]);
  });

  it("without a backfill lane it is the one rule it was: pause at the bound, resume at half", () => {
    const b = new LaneBackpressure(100, false);
    expect(b.onQueued(60)).toEqual([]);
    expect(b.onQueued(100)).toEqual(["online"]);
    expect(b.onDrained(50)).toEqual(["online"]);
  });
});
