import type { ResolveHook } from "node:module";
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

export async function loadModel(): Promise<NoopModel> {
  process.stderr.write(`${NOOP_SERVE_LINE} (bench/noop-serve.ts)\n`);
  return new NoopModel();
}
