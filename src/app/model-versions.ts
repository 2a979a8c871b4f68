import { readFile } from "node:fs/promises";
import type { SluiceConfig } from "../config/config-schema.js";
import { fingerprintModel } from "../model/model-fingerprint.js";
import { modelRunnerOptionsFromConfig } from "../model/model-runner-config.js";
import type { ModelRole } from "../model/model-set.js";
import { SluiceError } from "../sluice-error.js";

/**
 * The configuration as one role's model sees it: for `candidate`, its section in place of `model`
 * (a CONFIG_INVALID naming the key when there is none).
 */
export function roleConfig(config: SluiceConfig, role: ModelRole, what: string): SluiceConfig {
  if (role === "serving") return config;
  if (config.candidate === undefined) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `${what} needs a candidate section: set candidate.path (SLUICE_CANDIDATE__PATH) to the new model, as on the serve instances`,
    );
  }
  const { shadowShare: _shadowShare, ...model } = config.candidate;
  return { ...config, model };
}

/**
 * The version results of the configuration's `model` section carry (the fingerprint the runners
 * report), read from the files without loading the model; the default model is fetched once if absent,
 * as `serve` would.
 */
export async function configuredModelVersion(config: SluiceConfig): Promise<string> {
  const o = await modelRunnerOptionsFromConfig(config, (line) => process.stderr.write(`model: ${line}\n`));
  // A tensor model has no tokenizer (empty path): its fingerprint covers the model file alone.
  const [model, tokenizer] = await Promise.all([
    readFile(o.modelPath),
    o.tokenizerPath === "" ? new Uint8Array() : readFile(o.tokenizerPath),
  ]);
  return fingerprintModel(model, tokenizer).version;
}
