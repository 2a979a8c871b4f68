import { describe, expect, it } from "vitest";
import { CpuHeadroom, HEADROOM } from "../../../src/processor/cpu-headroom.js";

const TICK = 250;

describe("CpuHeadroom: the backfill leaves idle CPU for whatever wakes up", () => {
  it("keeps the whole budget while at least the reserve is idle", () => {
    const h = new CpuHeadroom(0.5);
    for (let t = 0; t <= 5000; t += TICK) h.observe(t, 0.8);
    expect(h.share).toBe(1);
    expect(h.idleCores).toBeCloseTo(0.8, 6);
  });

  it("halves at most every 500 ms while nothing is idle, down to the floor, never to 0", () => {
    const h = new CpuHeadroom(0.5);
    h.observe(0, 0);
    expect(h.share).toBe(HEADROOM.decreaseMin);
    h.observe(TICK, 0); // within settleMs of the decrease: held
    expect(h.share).toBe(HEADROOM.decreaseMin);
    h.observe(2 * TICK, 0);
    expect(h.share).toBe(HEADROOM.decreaseMin ** 2);
    for (let t = 3 * TICK; t <= 10_000; t += TICK) h.observe(t, 0);
    expect(h.share).toBe(HEADROOM.floor);
  });

  it("trims a little when the idle CPU is just under the reserve, and climbs back 0.2 per second once it is above", () => {
    const h = new CpuHeadroom(0.5);
    h.observe(0, 0.48);
    expect(h.share).toBe(HEADROOM.decreaseMax);
    for (let t = TICK; t <= 1000; t += TICK) h.observe(t, 1); // the average passes 0.5 at the first tick
    expect(h.share).toBeCloseTo(1, 6);
  });

  it("0 cores turns it off; readings that could not be taken change nothing", () => {
    const off = new CpuHeadroom(0);
    for (let t = 0; t <= 5000; t += TICK) off.observe(t, 0);
    expect(off.share).toBe(1);
    const h = new CpuHeadroom(0.5);
    h.observe(0, 0);
    const share = h.share;
    for (let t = TICK; t <= 5000; t += TICK) h.observe(t, undefined);
    expect(h.share).toBe(share);
    expect(() => new CpuHeadroom(-1)).toThrow(/≥ 0/);
  });

  it("two instances on one machine, with no word between them, leave about the reserve idle and end with equal shares", () => {
    // A 2-core machine; the broker and the online lanes use 0.4 cores; each instance's backfill uses
    // its budget (1 core × its share), one thread at most. The second instance starts 10 s later.
    const reserve = 0.5;
    const a = new CpuHeadroom(reserve);
    const b = new CpuHeadroom(reserve);
    let useA = 1;
    let useB = 0;
    const idleSeen: number[] = [];
    for (let t = 0; t <= 60_000; t += TICK) {
      const idle = Math.max(0, 2 - 0.4 - useA - useB);
      useA = Math.min(1, a.observe(t, idle));
      useB = t < 10_000 ? 0 : Math.min(1, b.observe(t, idle));
      if (t >= 40_000) idleSeen.push(idle);
    }
    expect(Math.abs(a.share - b.share)).toBeLessThan(0.1);
    const meanIdle = idleSeen.reduce((s, v) => s + v, 0) / idleSeen.length;
    expect(meanIdle).toBeGreaterThan(0.8 * reserve);
    expect(meanIdle).toBeLessThan(2 * reserve);
    // The backfill still gets most of what is left: together well over half a core.
    expect(a.share + b.share).toBeGreaterThan(0.6);
  });
});
