import { describe, expect, it } from "vitest";
import { IntakePacer, type PacedTask } from "../../../src/processor/intake-pacer.js";
import type { FetchedRecord } from "../../../src/processor/processor-ports.js";

/** A pacer with a manual clock (each take costs `costMs`) and a manual event loop (`turn()`). */
function pacer(costMs = 1, sliceMs = 5) {
  let now = 0;
  const turns: (() => void)[] = [];
  const taken: string[] = [];
  let slices = 0;
  const p = new IntakePacer<PacedTask & { name: string }>({
    take: (task, r) => {
      taken.push(`${task.name}:${r.offset}`);
      now += costMs;
    },
    afterSlice: () => {
      slices++;
    },
    sliceMs,
    now: () => now,
    defer: (fn) => turns.push(fn),
  });
  const turn = () => {
    const fn = turns.shift();
    fn?.();
    return fn !== undefined;
  };
  return { p, taken, turn, slices: () => slices, pendingTurns: () => turns.length };
}

const records = (from: number, n: number): FetchedRecord[] =>
  Array.from({ length: n }, (_, i) => ({ offset: String(from + i), key: null, value: null, timestamp: "0" }));
const task = (name: string, lane: "online" | "backfill") => ({ name, lane, generation: 1, running: true });

describe("IntakePacer: backfill fetches taken in slices, online records at once", () => {
  it("takes online records at once, in order", () => {
    const { p, taken, pendingTurns } = pacer();
    p.add(task("o", "online"), records(0, 3));
    expect(taken).toEqual(["o:0", "o:1", "o:2"]);
    expect(pendingTurns()).toBe(0);
  });

  it("takes a backfill fetch over several turns of at most sliceMs each, and an online record between them", () => {
    const { p, taken, turn, slices } = pacer(1, 5);
    const bf = task("b", "backfill");
    p.add(bf, records(0, 12));
    // Nothing yet: the fetch's handler returned at once (the records count as accepted).
    expect(taken).toEqual([]);
    expect(slices()).toBe(1);
    expect(p.waitingRecords).toBe(12);
    turn();
    expect(taken).toHaveLength(5);
    // An online fetch between two slices is taken at once.
    p.add(task("o", "online"), records(100, 1));
    expect(taken.at(-1)).toBe("o:100");
    while (turn()) {}
    expect(taken.filter((t) => t.startsWith("b:"))).toEqual(records(0, 12).map((r) => `b:${r.offset}`));
    expect(p.waitingRecords).toBe(0);
  });

  it("keeps each partition's fetch order across fetches and shares the slices between partitions", () => {
    const { p, taken, turn } = pacer(1, 4);
    const a = task("a", "backfill");
    const b = task("b", "backfill");
    p.add(a, records(0, 4));
    p.add(b, records(0, 4));
    p.add(a, records(4, 2));
    turn();
    expect(taken).toEqual(["a:0", "b:0", "a:1", "b:1"]);
    while (turn()) {}
    expect(taken.filter((t) => t.startsWith("a:"))).toEqual(["a:0", "a:1", "a:2", "a:3", "a:4", "a:5"]);
    expect(taken.filter((t) => t.startsWith("b:"))).toHaveLength(4);
  });

  it("drops what a partition still has waiting once its generation changes or it stops running", () => {
    const { p, taken, turn } = pacer(1, 2);
    const bf = task("b", "backfill");
    p.add(bf, records(0, 10));
    turn();
    expect(taken).toEqual(["b:0", "b:1"]);
    bf.generation = 2;
    while (turn()) {}
    expect(taken).toEqual(["b:0", "b:1"]);
    const c = task("c", "backfill");
    p.add(c, records(0, 10));
    c.running = false;
    while (turn()) {}
    expect(taken.filter((t) => t.startsWith("c:"))).toEqual([]);
    expect(p.waitingRecords).toBe(0);
  });

  it("a slice takes at least one record, however slow one is", () => {
    const { p, taken, turn } = pacer(50, 5);
    p.add(task("b", "backfill"), records(0, 3));
    turn();
    expect(taken).toEqual(["b:0"]);
  });
});
