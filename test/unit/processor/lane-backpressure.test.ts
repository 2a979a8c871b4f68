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
