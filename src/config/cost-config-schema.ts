import { z } from "zod";

/** The `cost` section: prices for CPU-seconds and GPU-hours (docs/observability.md, "Cost"). */
export const costSchema = z
  .strictObject({
    cpuCoreHour: z
      .number()
      .nonnegative()
      .optional()
      .describe(
        "Price of one CPU core (vCPU) for one hour, in cost.currency (e.g. a cloud's on-demand price per vCPU-hour); unset = no money figures.",
      ),
    gpuHour: z
      .number()
      .nonnegative()
      .optional()
      .describe("Price of one GPU for one hour, in cost.currency; used by `sluice plan --gpu`."),
    currency: z
      .string()
      .min(1)
      .optional()
      .describe("Currency of the prices (e.g. USD); unset = money fields are absent."),
    tokens: z
      .boolean()
      .default(true)
      .describe("Also report CPU-seconds (and money) per 1k tokens, beside per 1k items."),
  })
  .describe(
    "What compute costs: prices for money figures in batch manifests, backfill status and `sluice plan`.",
  );
