/**
 * What a run cost: CPU-seconds, items and tokens, the per-1k figures, and money when prices are set
 * (`cost.*` in the configuration). One home for the arithmetic that batch manifests, backfill status
 * and `sluice plan` share. Pure.
 */

/** `cost.*` of the configuration. */
export interface CostPrices {
  /** Price of one CPU core for one hour, in `currency`. */
  cpuCoreHour?: number;
  /** Price of one GPU for one hour, in `currency`. */
  gpuHour?: number;
  currency?: string;
  /** Report per 1k tokens beside per 1k items. */
  tokens: boolean;
}

/** What a run spent, as counted while it ran. */
export interface RunCostCounts {
  /** Items the model was asked to score (ok and failed). */
  items: number;
  /** Real tokens (before padding) the model ran. */
  tokens: number;
  /** CPU of the ORT calls on the inference worker threads, ms. */
  modelCpuMs: number;
  /** CPU of the whole process (every thread), ms; absent when not measured (backfill runs). */
  processCpuMs?: number;
  /** Wall time, ms; absent when not meaningful (a backfill run spread over instances). */
  wallMs?: number;
}

export interface RunCostMoney {
  currency: string;
  cpuCoreHour: number;
  /** CPU-hours priced: the total CPU when it is known, else the model CPU. */
  total: number;
  per1kItems: number | null;
  per1kTokens?: number | null;
}

/** `cost` of a batch manifest, of `sluice backfill status --json`, and of an export summary. */
export interface RunCost {
  items: number;
  tokens: number;
  modelCpuSeconds: number;
  totalCpuSeconds?: number;
  wallSeconds?: number;
  modelCpuSecondsPer1kItems: number | null;
  totalCpuSecondsPer1kItems?: number | null;
  modelCpuSecondsPer1kTokens?: number | null;
  totalCpuSecondsPer1kTokens?: number | null;
  money?: RunCostMoney;
}

const round = (x: number, digits = 6): number => Number(x.toFixed(digits));
/** Money is tiny per item: keep 4 significant digits rather than a fixed number of decimals. */
const sig = (x: number): number => Number(x.toPrecision(4));
const per1k = (seconds: number, n: number): number | null => (n > 0 ? round((seconds * 1000) / n) : null);

/** Whether money figures can be given: a CPU price and a currency. */
export function cpuPrice(prices: CostPrices): { cpuCoreHour: number; currency: string } | null {
  return prices.cpuCoreHour !== undefined && prices.currency !== undefined
    ? { cpuCoreHour: prices.cpuCoreHour, currency: prices.currency }
    : null;
}

export function runCost(c: RunCostCounts, prices: CostPrices): RunCost {
  const model = c.modelCpuMs / 1000;
  const total = c.processCpuMs === undefined ? undefined : c.processCpuMs / 1000;
  const out: RunCost = {
    items: c.items,
    tokens: c.tokens,
    modelCpuSeconds: round(model, 3),
    ...(total === undefined ? {} : { totalCpuSeconds: round(total, 3) }),
    ...(c.wallMs === undefined ? {} : { wallSeconds: round(c.wallMs / 1000, 3) }),
    modelCpuSecondsPer1kItems: per1k(model, c.items),
    ...(total === undefined ? {} : { totalCpuSecondsPer1kItems: per1k(total, c.items) }),
  };
  if (prices.tokens) {
    out.modelCpuSecondsPer1kTokens = per1k(model, c.tokens);
    if (total !== undefined) out.totalCpuSecondsPer1kTokens = per1k(total, c.tokens);
  }
  const price = cpuPrice(prices);
  if (price) {
    const money = ((total ?? model) / 3600) * price.cpuCoreHour;
    out.money = {
      currency: price.currency,
      cpuCoreHour: price.cpuCoreHour,
      total: sig(money),
      per1kItems: c.items > 0 ? sig((money * 1000) / c.items) : null,
      ...(prices.tokens ? { per1kTokens: c.tokens > 0 ? sig((money * 1000) / c.tokens) : null } : {}),
    };
  }
  return out;
}

/** Adds two runs' counts (an earlier invocation's and this one's). */
export function addRunCostCounts(a: RunCostCounts, b: RunCostCounts): RunCostCounts {
  const sum = (x: number | undefined, y: number | undefined) =>
    x === undefined && y === undefined ? undefined : (x ?? 0) + (y ?? 0);
  const processCpuMs = sum(a.processCpuMs, b.processCpuMs);
  const wallMs = sum(a.wallMs, b.wallMs);
  return {
    items: a.items + b.items,
    tokens: a.tokens + b.tokens,
    modelCpuMs: a.modelCpuMs + b.modelCpuMs,
    ...(processCpuMs === undefined ? {} : { processCpuMs }),
    ...(wallMs === undefined ? {} : { wallMs }),
  };
}

/** One line for summaries: `cost: 12.3 CPU-s (model 10.1), 4.1 CPU-s/1k items, 0.0012 USD`. */
export function formatRunCost(cost: RunCost): string {
  const s = (x: number | null | undefined, d = 2) => (x === null || x === undefined ? "–" : x.toFixed(d));
  const parts = [
    cost.totalCpuSeconds === undefined
      ? `model ${s(cost.modelCpuSeconds, 1)} CPU-s`
      : `${s(cost.totalCpuSeconds, 1)} CPU-s (model ${s(cost.modelCpuSeconds, 1)})`,
    `${s(cost.totalCpuSecondsPer1kItems ?? cost.modelCpuSecondsPer1kItems)} CPU-s/1k items`,
  ];
  const perTokens = cost.totalCpuSecondsPer1kTokens ?? cost.modelCpuSecondsPer1kTokens;
  if (perTokens !== undefined) parts.push(`${s(perTokens, 3)} CPU-s/1k tokens`);
  if (cost.money) {
    parts.push(
      `${cost.money.total.toPrecision(3)} ${cost.money.currency} (${cost.money.per1kItems?.toPrecision(3) ?? "–"} per 1k items)`,
    );
  }
  return `cost: ${parts.join(", ")}`;
}
