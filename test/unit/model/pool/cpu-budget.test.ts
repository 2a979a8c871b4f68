import { describe, expect, it } from "vitest";
import { CpuBudget, DEFAULT_BURST_MS } from "../../../../src/model/pool/cpu-budget.js";

describe("CpuBudget: the backfill lane's CPU as a token bucket of measured CPU-ms", () => {
  it("without a rate every call may start at once", () => {
    const b = new CpuBudget(0);
    b.charge(10_000, 0);
    expect(b.readyAt(0)).toBe(0);
  });

  it("a call that overdraws makes the next one wait until the rate has repaid it", () => {
    const b = new CpuBudget(0, 100);
    b.setCores(0.5, 0);
    expect(b.readyAt(0)).toBe(0);
    // 300 ms of CPU against a full bucket of 100: 200 ms in debt, repaid at 0.5 ms per ms.
    b.charge(300, 10);
    expect(b.readyAt(10)).toBeCloseTo(410, 6);
    expect(b.readyAt(300)).toBeCloseTo(410, 6);
    expect(b.readyAt(410)).toBe(410);
  });

  it("over a long stretch the calls it lets start use at most cores × the stretch + the bucket + one call", () => {
    const b = new CpuBudget(0);
    b.setCores(0.25, 0);
    let now = 0;
    let used = 0;
    const callMs = 30;
    // A worker that always has backfill work: it starts a call whenever the budget lets it.
    while (now < 60_000) {
      now = Math.max(now, b.readyAt(now));
      now += callMs;
      b.charge(callMs, now);
      used += callMs;
    }
    expect(used).toBeLessThanOrEqual(0.25 * now + DEFAULT_BURST_MS + callMs);
    expect(used).toBeGreaterThan(0.25 * now * 0.95);
  });

  it("an idle stretch saves up at most the bucket, and 0 cores holds every call", () => {
    const b = new CpuBudget(0, 100);
    b.setCores(1, 0);
    b.charge(100, 0);
    expect(b.readyAt(0)).toBe(0);
    b.charge(1000, 60_000);
    // A minute idle earned 100 ms, not 60 s: 900 ms of debt remain.
    expect(b.readyAt(60_000)).toBeCloseTo(60_900, 6);
    b.setCores(0, 60_000);
    expect(b.readyAt(70_000)).toBe(Number.POSITIVE_INFINITY);
    b.setCores(2, 70_000);
    expect(b.readyAt(70_000)).toBeCloseTo(70_450, 6);
  });
});
