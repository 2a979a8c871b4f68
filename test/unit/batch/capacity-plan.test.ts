import { describe, expect, it } from "vitest";
import { formatCapacityPlan, parseDurationMs, planCapacity } from "../../../src/batch/capacity-plan.js";
import { isSluiceError } from "../../../src/sluice-error.js";

describe("planCapacity", () => {
  it("reproduces the issue's example: 5M items in 2h at 60/s per worker", () => {
    const plan = planCapacity({
      items: 5_000_000,
      windowMs: 2 * 3_600_000,
      perWorkerItemsPerSec: 60,
      headroom: 0.2,
    });
    expect(plan.requiredItemsPerSec).toBeCloseTo(694.444, 3);
    expect(plan.workers).toBe(12);
    expect(plan.workersWithHeadroomLow).toBe(14); // ceil(694.44 × 1.2 / 60) = ceil(13.89)
    expect(plan.workersWithHeadroomHigh).toBe(16); // ceil(694.44 / 48) + 1 = 15 + 1
  });

  it("prices the issue's example: core-hours busy and provisioned, money when a price is set", () => {
    const input = { items: 5_000_000, windowMs: 2 * 3_600_000, perWorkerItemsPerSec: 60, headroom: 0.2 };
    const unpriced = planCapacity(input);
    expect(unpriced.cost.unit).toBe("core-hours");
    expect(unpriced.cost.busyHours).toBeCloseTo(23.148, 3); // 5e6 / 60 / 3600
    expect(unpriced.cost.provisionedHours).toBe(32); // 16 workers × 2 h
    expect(unpriced.cost.money).toBeUndefined();
    const priced = planCapacity({ ...input, prices: { cpuCoreHour: 0.04, currency: "USD", tokens: true } });
    expect(priced.cost.money?.busy).toBeCloseTo(0.926, 3);
    expect(priced.cost.money?.provisioned).toBeCloseTo(1.28, 9);
    expect(priced.cost.money?.per1kItems).toBeCloseTo(0.000185, 6);
    expect(formatCapacityPlan(priced)).toMatch(/cost: +0\.926 USD busy/);
    // A measured CPU per item (every thread) replaces rate × cores; GPUs are priced by gpuHour.
    expect(planCapacity({ ...input, cpuSecondsPerItem: 0.01 }).cost.busyHours).toBeCloseTo(13.889, 3);
    const gpu = planCapacity({ ...input, gpu: true, prices: { gpuHour: 2, currency: "USD", tokens: true } });
    expect(gpu.cost.unit).toBe("GPU-hours");
    expect(gpu.cost.money?.busy).toBeCloseTo(46.296, 3);
  });

  it("does not round up exact multiples because of float noise", () => {
    const plan = planCapacity({ items: 720, windowMs: 1000, perWorkerItemsPerSec: 60, headroom: 0 });
    expect(plan.workers).toBe(12);
    expect(plan.workersWithHeadroomLow).toBe(12);
    expect(plan.workersWithHeadroomHigh).toBe(13);
  });

  it("never plans fewer than one worker", () => {
    const plan = planCapacity({ items: 1, windowMs: 3_600_000, perWorkerItemsPerSec: 100 });
    expect(plan.workers).toBe(1);
    expect(plan.headroom).toBe(0.2);
  });

  it.each([
    { items: 0, windowMs: 1, perWorkerItemsPerSec: 1 },
    { items: 1, windowMs: -5, perWorkerItemsPerSec: 1 },
    { items: 1, windowMs: 1, perWorkerItemsPerSec: Number.NaN },
    { items: 1, windowMs: 1, perWorkerItemsPerSec: 1, headroom: 1 },
  ])("rejects invalid input %o with CONFIG_INVALID", (input) => {
    try {
      planCapacity(input);
      expect.unreachable();
    } catch (err) {
      expect(isSluiceError(err, "CONFIG_INVALID")).toBe(true);
    }
  });
});

describe("parseDurationMs", () => {
  it.each([
    ["2h", 7_200_000],
    ["90m", 5_400_000],
    ["1h30m", 5_400_000],
    ["45s", 45_000],
    ["1500ms", 1500],
    ["30", 30_000],
  ])("%s → %d ms", (text, ms) => {
    expect(parseDurationMs(text)).toBe(ms);
  });

  it("rejects garbage", () => {
    expect(() => parseDurationMs("2 hours")).toThrow(/cannot read duration/);
    expect(() => parseDurationMs("h")).toThrow(/cannot read duration/);
  });
});
