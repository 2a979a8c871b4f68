import type { SluiceConfig } from "../config/config-schema.js";
import { envNameFor } from "../config/env-overrides.js";
import { ensureDefaultModel } from "./default-model.js";
import { resolveModelFiles } from "./model-files.js";
import type { ModelRunnerOptions } from "./model-runner.js";

/**
 * The one mapping from the configuration's `model` (and `batching.bucketing`) section to
 * `ModelRunner` options, shared by `sluice serve`, `sluice batch`, `sluice plan --measure` and the demo.
 * When no model path is configured, the default model is fetched (or found in `models/`).
 */
export async function modelRunnerOptionsFromConfig(
  config: Pick<SluiceConfig, "model" | "batching">,
  log: (line: string) => void,
): Promise<ModelRunnerOptions> {
  const m = config.model;
  let modelPath: string;
  let tokenizerPath: string;
  if (m.path === undefined) {
    const files = await ensureDefaultModel({ log });
    modelPath = files.modelPath;
    tokenizerPath = m.tokenizerPath ?? files.tokenizerPath;
  } else {
    ({ modelPath, tokenizerPath } = resolveModelFiles(
      { modelPath: m.path, tokenizerPath: m.tokenizerPath },
      { model: setting("model.path"), tokenizer: setting("model.tokenizerPath") },
    ));
  }
  const names = m.inputNames ?? {};
  const inputNames = {
    ...(names["input_ids"] ? { inputIds: names["input_ids"] } : {}),
    ...(names["attention_mask"] ? { attentionMask: names["attention_mask"] } : {}),
    ...(names["token_type_ids"] ? { tokenTypeIds: names["token_type_ids"] } : {}),
  };
  return {
    modelPath,
    tokenizerPath,
    name: m.name,
    task: m.task,
    pooling: m.pooling,
    normalize: m.normalize,
    maxSequenceTokens: m.maxSequenceTokens,
    ...(m.labels ? { labels: m.labels } : {}),
    ...(Object.keys(inputNames).length > 0 ? { inputNames } : {}),
    workers: m.workers,
    intraOpThreads: m.intraOpThreads,
    textPrefix: m.textPrefix,
    itemIsolation: m.itemIsolation,
    bucketing: config.batching.bucketing,
    onnxruntimeTelemetry: m.onnxruntimeTelemetry,
  };
}

/** A key as messages name it: `model.path (SLUICE_MODEL__PATH)`. */
function setting(key: string): string {
  return `${key} (${envNameFor(key)})`;
}
