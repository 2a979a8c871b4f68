import { describe, expect, it } from "vitest";
import { LaneBackpressure } from "../../../src/processor/lane-backpressure.js";

const q = (online: number, backfill: number) => ({ online, backfill });

describe("LaneBackpressure", () => {
  it("pauses backfill at half the bound and online at the bound; resumes online at half, backfill at a quarter", () => {
    const b = new LaneBackpressure(100, true);
    expect(b.onQueued(q(0, 49))).toEqual([]);
    expect(b.onQueued(q(0, 50))).toEqual(["backfill"]);
    expect(b.pausesLane("online")).toBe(false);
    expect(b.onQueued(q(49, 50))).toEqual([]);
    expect(b.onQueued(q(50, 50))).toEqual(["online"]);
    expect(b.onDrained(q(1, 50))).toEqual([]);
    expect(b.onDrained(q(0, 50))).toEqual(["online"]);
    expect(b.onDrained(q(0, 26))).toEqual([]);
    expect(b.onDrained(q(0, 25))).toEqual(["backfill"]);
    expect(b.paused).toBe(false);
  });

  it("a backfill fetch far past its half pauses backfill only: online keeps its half of the bound", () => {
    const b = new LaneBackpressure(100, true);
    // One fetch of a deep backlog brings 5000 backfill records at once.
    expect(b.onQueued(q(0, 5000))).toEqual(["backfill"]);
    expect(b.onQueued(q(49, 5000))).toEqual([]);
    expect(b.pausesLane("online")).toBe(false);
    expect(b.onQueued(q(50, 5000))).toEqual(["online"]);
    // Backfill resumes only once online runs and its own records are down to a quarter.
    expect(b.onDrained(q(0, 30))).toEqual(["online"]);
    expect(b.onDrained(q(0, 25))).toEqual(["backfill"]);
  });

  it("a jump straight over the bound pauses both lanes at once", () => {
    const b = new LaneBackpressure(100, true);
    expect(b.onQueued(q(100, 60))).toEqual(["backfill", "online"]);
    expect(b.onDrained(q(0, 10))).toEqual(["online", "backfill"]);
  });

  it("without a backfill lane it is the one rule it was: pause at the bound, resume at half", () => {
    const b = new LaneBackpressure(100, false);
    expect(b.onQueued(q(60, 0))).toEqual([]);
    expect(b.onQueued(q(100, 0))).toEqual(["online"]);
    expect(b.onDrained(q(50, 0))).toEqual(["online"]);
  });
});

describe("LaneBackpressure: the SLO guard holds the backfill lane", () => {
  it("pauses and resumes backfill alone; the queue bound and the guard each keep it paused", () => {
    const bp = new LaneBackpressure(100, true);
    expect(bp.holdBackfill(true)).toBe("pause");
    expect(bp.pausesLane("backfill")).toBe(true);
    expect(bp.pausesLane("online")).toBe(false);
    expect(bp.holdBackfill(true)).toBeUndefined();
    // The bound pauses it too; draining clears the bound but the guard still holds it.
    expect(bp.onQueued({ online: 0, backfill: 60 })).toEqual(["backfill"]);
    expect(bp.onDrained({ online: 0, backfill: 0 })).toEqual([]);
    expect(bp.pausesLane("backfill")).toBe(true);
    expect(bp.holdBackfill(false)).toBe("resume");
    expect(bp.pausesLane("backfill")).toBe(false);
    // Held by the bound: the guard letting go does not resume it.
    bp.onQueued({ online: 0, backfill: 60 });
    expect(bp.holdBackfill(true)).toBeUndefined();
    expect(bp.holdBackfill(false)).toBeUndefined();
    expect(bp.pausesLane("backfill")).toBe(true);
  });
});
