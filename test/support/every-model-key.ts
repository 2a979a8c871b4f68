import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultConfig, type SluiceConfig } from "../../src/config/config-schema.js";

/** Placeholder model files (the mapping checks they exist; it does not load them). */
export const fixtureDir = mkdtempSync(join(tmpdir(), "sluice-model-mapping-"));
export const modelPath = join(fixtureDir, "model.onnx");
export const tokenizerPath = join(fixtureDir, "vocab.json");
writeFileSync(modelPath, "x");
writeFileSync(tokenizerPath, "{}");

/** Every key of the `model` section with a value other than its default. A new key must be added here. */
export const everyModelKey: SluiceConfig["model"] = {
  name: "configured-name",
  path: modelPath,
  tokenizerPath,
  task: "classification",
  pooling: "mean",
  normalize: false,
  maxSequenceTokens: 64,
  labels: ["neg", "pos"],
  inputNames: { input_ids: "ids", attention_mask: "mask", token_type_ids: "segments" },
  outputName: "scores",
  workers: 3,
  intraOpThreads: 2,
  interOpThreads: 3,
  allowSpinning: true,
  backfillSliceRows: 9,
  backfillSliceMs: 35,
  backfillWorkers: 2,
  backfillNice: 5,
  backfillScheduling: "idle",
  textPrefix: "query: ",
  itemIsolation: "never",
  onnxruntimeTelemetry: true,
};

export const configWithEveryModelKey = (): SluiceConfig => {
  const base = defaultConfig();
  return { ...base, model: everyModelKey, batching: { ...base.batching, bucketing: false } };
};
