import type { CostPrices } from "../runs/run-cost.js";
import { SluiceError } from "../sluice-error.js";

const money = (x: number): string => (x >= 1 ? x.toFixed(2) : x.toPrecision(3));

/**
 * Capacity planning for a batch job: how many workers score `items` within a time window.
 * Pure arithmetic so it can be unit-tested and reused by `sluice plan`.
 *
 * Rounding rules (docs/batch-mode.md, "Plan math"):
 * - `requiredItemsPerSec = items / windowSec` (not rounded).
 * - `workers = ceil(requiredItemsPerSec / perWorkerItemsPerSec)`: the bare minimum, every worker at 100 %.
 * - `workersWithHeadroomLow = ceil(requiredItemsPerSec × (1 + headroom) / perWorkerItemsPerSec)`: headroom read
 *   as "plan for `headroom` more load than expected".
 * - `workersWithHeadroomHigh = ceil(requiredItemsPerSec / (perWorkerItemsPerSec × (1 − headroom))) + 1`:
 *   headroom read as "no worker above `1 − headroom` utilisation", plus one spare so losing a worker mid-run
 *   still meets the window (N+1).
 * 5,000,000 items in 2 h at 60 items/s/worker with 0.2 headroom: 694.44 items/s, 12 workers, 14–16.
 *
 * Pricing (docs/batch-mode.md, "Plan math"):
 * - `busyHours = items / perWorkerItemsPerSec / 3600 × coresPerWorker` core-hours (GPU-hours with
 *   `gpu`): the compute the job consumes at full rate, whatever the window; with a measured CPU per
 *   item (`--measure`) it is `items × cpuSecondsPerItem / 3600` instead, every thread of the process
 *   counted;
 * - `provisionedHours = workersWithHeadroomHigh × coresPerWorker × windowHours`: holding the high
 *   headroom fleet for the whole window;
 * - money = hours × `cost.cpuCoreHour` (or `cost.gpuHour`) when the price and `cost.currency` are set.
 * The seed example at 60 items/s and one core per worker: 23.15 core-hours busy, 32 provisioned.
 */
export interface CapacityPlanInput {
  items: number;
  windowMs: number;
  perWorkerItemsPerSec: number;
  /** Fraction in [0, 1). Default 0.2. */
  headroom?: number;
  /** Cores one worker keeps busy (`model.intraOpThreads`). Default 1. */
  coresPerWorker?: number;
  /** Measured CPU-seconds per item, all threads (replaces rate × cores for the busy hours). */
  cpuSecondsPerItem?: number;
  /** Workers are GPUs: hours are GPU-hours, priced by `gpuHour`. */
  gpu?: boolean;
  prices?: CostPrices;
}

export interface CapacityPlanCost {
  unit: "core-hours" | "GPU-hours";
  busyHours: number;
  provisionedHours: number;
  /** Present when the unit's price and the currency are set. */
  money?: { currency: string; pricePerHour: number; busy: number; provisioned: number; per1kItems: number };
}

export interface CapacityPlan {
  items: number;
  windowSec: number;
  perWorkerItemsPerSec: number;
  headroom: number;
  requiredItemsPerSec: number;
  workers: number;
  workersWithHeadroomLow: number;
  workersWithHeadroomHigh: number;
  /** Window needed by `workers` workers at full rate, seconds. */
  expectedWallSec: number;
  cost: CapacityPlanCost;
}

// Guards ceil() against binary floating-point noise such as 12.000000000000002.
const EPSILON = 1e-9;
const ceil = (x: number): number => Math.ceil(x - EPSILON);

export function planCapacity(input: CapacityPlanInput): CapacityPlan {
  const headroom = input.headroom ?? 0.2;
  const positive = (name: string, v: number) => {
    if (!Number.isFinite(v) || v <= 0) {
      throw new SluiceError("CONFIG_INVALID", `${name} must be a positive number, got ${v}`);
    }
  };
  positive("items", input.items);
  positive("window", input.windowMs);
  positive("per-worker rate (items/s)", input.perWorkerItemsPerSec);
  if (!Number.isFinite(headroom) || headroom < 0 || headroom >= 1) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `headroom must be in [0, 1) (e.g. 0.2 for 20 %), got ${headroom}`,
    );
  }
  const windowSec = input.windowMs / 1000;
  const required = input.items / windowSec;
  const q = input.perWorkerItemsPerSec;
  const workers = Math.max(1, ceil(required / q));
  const high = Math.max(1, ceil(required / (q * (1 - headroom)))) + 1;
  return {
    items: input.items,
    windowSec,
    perWorkerItemsPerSec: q,
    headroom,
    requiredItemsPerSec: required,
    workers,
    workersWithHeadroomLow: Math.max(1, ceil((required * (1 + headroom)) / q)),
    workersWithHeadroomHigh: high,
    expectedWallSec: input.items / (workers * q),
    cost: planCost(input, windowSec, high),
  };
}

function planCost(input: CapacityPlanInput, windowSec: number, fleet: number): CapacityPlanCost {
  const cores = input.gpu ? 1 : (input.coresPerWorker ?? 1);
  if (!Number.isFinite(cores) || cores <= 0) {
    throw new SluiceError("CONFIG_INVALID", `cores per worker must be a positive number, got ${cores}`);
  }
  const busySec =
    input.cpuSecondsPerItem !== undefined && !input.gpu
      ? input.items * input.cpuSecondsPerItem
      : (input.items / input.perWorkerItemsPerSec) * cores;
  const cost: CapacityPlanCost = {
    unit: input.gpu ? "GPU-hours" : "core-hours",
    busyHours: busySec / 3600,
    provisionedHours: (fleet * cores * windowSec) / 3600,
  };
  const prices = input.prices;
  const price = input.gpu ? prices?.gpuHour : prices?.cpuCoreHour;
  if (price !== undefined && prices?.currency !== undefined) {
    const busy = cost.busyHours * price;
    cost.money = {
      currency: prices.currency,
      pricePerHour: price,
      busy,
      provisioned: cost.provisionedHours * price,
      per1kItems: (busy * 1000) / input.items,
    };
  }
  return cost;
}

/** Parses "2h", "90m", "45s", "1h30m", "1500ms" or a bare number of seconds into milliseconds. */
export function parseDurationMs(text: string): number {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let total = 0;
  let consumed = 0;
  for (let m = re.exec(trimmed); m !== null; m = re.exec(trimmed)) {
    total += Number(m[1]) * unitMs[m[2]!]!;
    consumed = re.lastIndex;
  }
  if (consumed === 0 || consumed !== trimmed.length) {
    throw new SluiceError("CONFIG_INVALID", `cannot read duration "${text}": use e.g. 2h, 90m, 1h30m, 45s`);
  }
  return total;
}

/** Human-readable plan, one fact per line. */
export function formatCapacityPlan(plan: CapacityPlan): string {
  const rate = (n: number) => n.toLocaleString("en-US", { maximumFractionDigits: 2 });
  return [
    `items:              ${plan.items.toLocaleString("en-US")}`,
    `window:             ${rate(plan.windowSec)} s`,
    `required rate:      ${rate(plan.requiredItemsPerSec)} items/s`,
    `per-worker rate:    ${rate(plan.perWorkerItemsPerSec)} items/s`,
    `workers (minimum):  ${plan.workers}`,
    `workers (headroom ${Math.round(plan.headroom * 100)} %): ${plan.workersWithHeadroomLow}–${plan.workersWithHeadroomHigh}` +
      "  (low: load × (1 + headroom); high: utilisation ≤ 1 − headroom, plus one spare)",
    `wall time at minimum: ${rate(plan.expectedWallSec / 60)} min`,
    `compute:            ${rate(plan.cost.busyHours)} ${plan.cost.unit} busy, ${rate(plan.cost.provisionedHours)} provisioned (high headroom fleet for the window)`,
    ...(plan.cost.money
      ? [
          `cost:               ${money(plan.cost.money.busy)} ${plan.cost.money.currency} busy (${money(plan.cost.money.per1kItems)} per 1k items), ` +
            `${money(plan.cost.money.provisioned)} provisioned, at ${plan.cost.money.pricePerHour} per ${plan.cost.unit === "GPU-hours" ? "GPU" : "core"}-hour`,
        ]
      : [
          `cost:               set ${plan.cost.unit === "GPU-hours" ? "cost.gpuHour" : "cost.cpuCoreHour"} and cost.currency for a money figure`,
        ]),
  ].join("\n");
}
