import type { ResolveHook } from "node:module";
import type { ModelDescription } from "../src/model/model-description.js";
import { NoopModel } from "../src/model/noop-model.js";

/**
 * The hooks noop-serve.ts registers, and the module they substitute. `resolve` sends every import of
 * the model loader (src/model/model-loader.js) to this file, whose `loadModel` ignores the model
 * settings and returns the no-op model, saying so once on stderr (bench:ceiling checks the line).
 */
export const NOOP_SERVE_LINE = "noop-serve: model loading replaced by the no-op model";

export const resolve: ResolveHook = async (specifier, context, nextResolve) => {
  const resolved = await nextResolve(specifier, context);
  if (resolved.url.endsWith("/src/model/model-loader.js") && resolved.url !== import.meta.url) {
    return { url: import.meta.url, shortCircuit: true };
  }
  return resolved;
};

/**
 * The no-op model with the description serve reads of every loaded model (its task and output size,
 * in the `model loaded` line and the candidate comparison): an embedding of `dimensions` zeros, no
 * files, no tensors.
 */
export async function loadModel(): Promise<NoopModel & { description: ModelDescription }> {
  process.stderr.write(`${NOOP_SERVE_LINE} (bench/noop-serve.ts)\n`);
  const model = new NoopModel();
  const description: ModelDescription = {
    identity: model.identity,
    task: model.task,
    modelSha256: "",
    tokenizerSha256: "",
    inputs: [],
    outputs: [],
    feeds: { inputIds: "", attentionMask: "", tokenTypeIds: null },
    outputName: "",
    outputSize: model.dimensions,
    labels: null,
    maxSequenceTokens: Number.MAX_SAFE_INTEGER,
    batchDependent: false,
    isolateItems: false,
  };
  return Object.assign(model, { description });
}
