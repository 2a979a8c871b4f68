import { describe, expect, it } from "vitest";
import { ShutdownBudget } from "../../../src/processor/shutdown-budget.js";

describe("ShutdownBudget", () => {
  it("keeps a quarter of the budget (at most 5 s) in reserve for the final commits", () => {
    let now = 1000;
    const b = new ShutdownBudget(20_000, () => now);
    expect(b.reserveMs).toBe(5000);
    expect(new ShutdownBudget(2000, () => now).reserveMs).toBe(500);
    expect(b.remainingMs()).toBe(20_000);
    expect(b.remainingMs(true)).toBe(15_000);
    now += 16_000;
    expect(b.remainingMs(true)).toBe(0);
    expect(b.remainingMs()).toBe(4000);
    now += 10_000;
    expect(b.remainingMs()).toBe(0);
  });

  it("waitFor: true when the work ends in time (even by failing), false when the budget ends first", async () => {
    const b = new ShutdownBudget(200);
    expect(await b.waitFor(Promise.resolve())).toBe(true);
    expect(await b.waitFor(Promise.reject(new Error("x")))).toBe(true);
    expect(await b.waitFor(new Promise(() => {}))).toBe(false);
    expect(b.remainingMs()).toBeLessThan(50);
  });

  it("unbounded by default; rejects a non-positive budget", async () => {
    const b = new ShutdownBudget();
    expect(b.remainingMs(true)).toBe(Number.POSITIVE_INFINITY);
    expect(await b.waitFor(new Promise((r) => setTimeout(r, 5)))).toBe(true);
    expect(() => new ShutdownBudget(0)).toThrow(RangeError);
  });
});
