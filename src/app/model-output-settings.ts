import type { SluiceConfig } from "../config/config-schema.js";

/**
 * The model settings that change what the model returns for a row (the model and tokenizer files are
 * covered by the model version); part of every batch and backfill manifest's config digest.
 */
export function modelOutputSettings(config: SluiceConfig): Record<string, unknown> {
  const m = config.model;
  return {
    task: m.task,
    pooling: m.pooling,
    normalize: m.normalize,
    maxSequenceTokens: m.maxSequenceTokens,
    textPrefix: m.textPrefix,
    labels: m.labels ?? null,
  };
}
