import { maxBatchSize, type SluiceConfig } from "../config/config-schema.js";
import { envNameFor } from "../config/env-overrides.js";
import type { ModelSettings } from "../config/model-settings.js";
import { ensureDefaultModel } from "./default-model.js";
import { type ModelFileSettings, resolveModelFiles, resolveTensorModelFile } from "./model-files.js";

/** How a command's files are found and named; `serve`, `batch` and the benches take the defaults. */
export interface ModelFilesFrom {
  /** Where the default model is cached (`--models-dir`); default `ensureDefaultModel`'s. */
  modelsDir?: string;
  /** The settings the user used for the two files, for messages; default the configuration keys. */
  settings?: ModelFileSettings;
}

const CONFIG_SETTINGS: ModelFileSettings = {
  model: setting("model.path"),
  tokenizer: setting("model.tokenizerPath"),
};

const CANDIDATE_SETTINGS: ModelFileSettings = {
  model: setting("candidate.path"),
  tokenizer: setting("candidate.tokenizerPath"),
};

/**
 * The candidate's runner settings (docs/model-upgrades.md): the `candidate` section through the same
 * mapping as `model` (its files named as `candidate.*` keys in messages); undefined without one.
 * `shadowShare` is the processor's, not the runner's.
 */
export async function candidateRunnerOptionsFromConfig(
  config: Pick<SluiceConfig, "candidate" | "batching"> & {
    topics?: Pick<SluiceConfig["topics"], "backfill">;
  },
  log: (line: string) => void,
  from: ModelFilesFrom = {},
): Promise<ModelSettings | undefined> {
  if (config.candidate === undefined) return undefined;
  const { shadowShare: _shadowShare, ...model } = config.candidate;
  return modelRunnerOptionsFromConfig({ ...config, model }, log, { settings: CANDIDATE_SETTINGS, ...from });
}

/**
 * The one mapping from the configuration's `model` section (and `batching.bucketing`) to the
 * `TextModelRunner` settings, used by every command that runs a model: `serve`, `batch`, backfill,
 * `plan --measure`, `infer`, `model info` (their flags are configuration overrides) and the benches.
 * Every `model` key passes through unchanged except `path`/`tokenizerPath`, which become the resolved
 * files; with no `model.path`, the default model is fetched (or found in `models/`). `backfillLane`
 * comes from `topics.backfill` (serve's lanes).
 */
export async function modelRunnerOptionsFromConfig(
  config: Pick<SluiceConfig, "model" | "batching"> & { topics?: Pick<SluiceConfig["topics"], "backfill"> },
  log: (line: string) => void,
  from: ModelFilesFrom = {},
): Promise<ModelSettings> {
  const { path, tokenizerPath: tokenizer, ...model } = config.model;
  let files: { modelPath: string; tokenizerPath: string };
  if (config.model.task === "tensor") {
    files = { modelPath: resolveTensorModelFile(path, from.settings ?? CONFIG_SETTINGS), tokenizerPath: "" };
  } else if (path === undefined) {
    const fetched = await ensureDefaultModel({
      log,
      ...(from.modelsDir === undefined ? {} : { modelsDir: from.modelsDir }),
    });
    files = { modelPath: fetched.modelPath, tokenizerPath: tokenizer ?? fetched.tokenizerPath };
  } else {
    files = resolveModelFiles(
      { modelPath: path, tokenizerPath: tokenizer },
      from.settings ?? CONFIG_SETTINGS,
    );
  }
  return {
    ...model,
    ...files,
    bucketing: config.batching.bucketing,
    maxRequestRows: maxBatchSize(config.batching, config.model.task),
    backfillLane: (config.topics?.backfill.length ?? 0) > 0,
  };
}

/** A key as messages name it: `model.path (SLUICE_MODEL__PATH)`. */
function setting(key: string): string {
  return `${key} (${envNameFor(key)})`;
}
