import type { BatchJobOptions } from "../../src/batch/batch-job.js";
import { sluiceConfigSchema } from "../../src/config/index.js";

const defaults = sluiceConfigSchema.parse({});

/**
 * The tuning options `createBatchRuntime` resolves for a default configuration and no flags, read from
 * the config schema (their one home) so tests do not restate them. Tests spread it and override what
 * they test.
 */
export const defaultJobOptions = {
  shardSize: defaults.batch.shardSize,
  batchSize: defaults.batching.maxBatchSize,
  maxInFlightBatches: defaults.batching.maxInFlightBatches,
  sortByLength: true,
  mode: "resume",
} satisfies Partial<BatchJobOptions>;
