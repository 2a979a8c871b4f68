import { SluiceError } from "../sluice-error.js";

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
 */
export interface CapacityPlanInput {
  items: number;
  windowMs: number;
  perWorkerItemsPerSec: number;
  /** Fraction in [0, 1). Default 0.2. */
  headroom?: number;
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
  return {
    items: input.items,
    windowSec,
    perWorkerItemsPerSec: q,
    headroom,
    requiredItemsPerSec: required,
    workers,
    workersWithHeadroomLow: Math.max(1, ceil((required * (1 + headroom)) / q)),
    workersWithHeadroomHigh: Math.max(1, ceil(required / (q * (1 - headroom)))) + 1,
    expectedWallSec: input.items / (workers * q),
  };
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
  ].join("\n");
}
