import { z } from "zod";
import { SluiceError } from "../sluice-error.js";
import { formatIssues } from "./config-loader.js";
import { batchingSchema, maxBatchSize, modelSchema, type SluiceConfig } from "./config-schema.js";

/**
 * What the model runner runs with: every key of the configuration's `model` section, resolved (the
 * schema's defaults applied), with the resolved files in place of `model.path`/`model.tokenizerPath`,
 * plus `batching.bucketing`. Derived from the schema, so a new `model` key is a runner setting too.
 */
export type ModelSettings = Omit<SluiceConfig["model"], "path" | "tokenizerPath"> & {
  /** The ONNX file to load: `model.path`, or the default model's file. */
  modelPath: string;
  /** The tokenizer.json to load: `model.tokenizerPath`, or the one next to the model. */
  tokenizerPath: string;
  /** `batching.bucketing`: sort a batch by token length and run length-homogeneous sub-batches. */
  bucketing: boolean;
  /** `batching.maxBatchSize`: most rows one tensor request may carry (model.task tensor). */
  maxRequestRows: number;
  /** The instance runs a backfill lane (`topics.backfill` set): `model.backfillWorkers: auto` starts backfill workers. */
  backfillLane: boolean;
};

/** Any `model` key (as a config file would give it) and `bucketing` may be left out; the files may not. */
export type ModelSettingsInput = Omit<z.input<typeof modelSchema>, "path" | "tokenizerPath"> & {
  modelPath: string;
  tokenizerPath: string;
  bucketing?: boolean;
  maxRequestRows?: number;
  backfillLane?: boolean;
};

const settingsSchema = z.strictObject({
  modelPath: z.string().min(1),
  // Empty for model.task tensor, which has no tokenizer.
  tokenizerPath: z.string(),
  model: modelSchema.omit({ path: true, tokenizerPath: true }),
  batching: batchingSchema.pick({ bucketing: true, maxBatchSize: true }),
});

/**
 * Model settings for programmatic callers (tests, benches): the given keys validated and the rest
 * defaulted by the configuration schema, the one home of those rules. Commands get theirs from the
 * configuration instead (`modelRunnerOptionsFromConfig`). Throws `CONFIG_INVALID` naming the key.
 */
export function modelSettings(input: ModelSettingsInput): ModelSettings {
  const { modelPath, tokenizerPath, bucketing, maxRequestRows, backfillLane, ...model } = input;
  const batchingGiven = {
    ...(bucketing === undefined ? {} : { bucketing }),
    ...(maxRequestRows === undefined ? {} : { maxBatchSize: maxRequestRows }),
  };
  const given = { modelPath, tokenizerPath, model, batching: batchingGiven };
  const parsed = settingsSchema.safeParse(given);
  if (!parsed.success) {
    throw new SluiceError("CONFIG_INVALID", formatIssues(parsed.error.issues, given, new Map()));
  }
  const { model: resolved, batching, ...files } = parsed.data;
  return {
    ...resolved,
    ...files,
    bucketing: batching.bucketing,
    maxRequestRows: maxBatchSize(batching, resolved.task),
    backfillLane: backfillLane ?? false,
  };
}
