import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { SluiceError } from "../sluice-error.js";

/** How the caller names the two settings in messages, e.g. `model.path (SLUICE_MODEL__PATH)` or `--model`. */
export interface ModelFileSettings {
  model: string;
  tokenizer: string;
}

/** The file name looked for next to a model when no tokenizer is given (what `sluice model fetch` writes). */
export const TOKENIZER_FILE = "tokenizer.json";

/**
 * Checks a user-given model file and finds its tokenizer, so a wrong path is reported as that, in the
 * words of the setting the user used. Rule: without an explicit tokenizer, `tokenizer.json` in the
 * model's folder is used (Hugging Face exports and `sluice model fetch` both put it there).
 */
export function resolveModelFiles(
  files: { modelPath: string; tokenizerPath?: string | undefined },
  settings: ModelFileSettings,
): { modelPath: string; tokenizerPath: string } {
  const { modelPath } = files;
  if (!isFile(modelPath)) {
    throw new SluiceError(
      "MODEL_NOT_FOUND",
      `${settings.model} = ${modelPath}: ${existsSync(modelPath) ? "not a file" : "no such file"}; point it at an ONNX model file, or leave it unset for the default model (\`sluice model fetch\`)`,
    );
  }
  if (files.tokenizerPath !== undefined) {
    if (!isFile(files.tokenizerPath)) {
      throw new SluiceError(
        "MODEL_NOT_FOUND",
        `${settings.tokenizer} = ${files.tokenizerPath}: no such file; point it at the model's ${TOKENIZER_FILE}`,
      );
    }
    return { modelPath, tokenizerPath: files.tokenizerPath };
  }
  const beside = join(dirname(modelPath), TOKENIZER_FILE);
  if (!isFile(beside)) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `no tokenizer for ${modelPath}: there is no ${TOKENIZER_FILE} next to it; set ${settings.tokenizer} to the model's ${TOKENIZER_FILE}`,
    );
  }
  return { modelPath, tokenizerPath: beside };
}

/** `model.task: tensor` has no default model and no tokenizer: only the ONNX file, which must exist. */
export function resolveTensorModelFile(modelPath: string | undefined, settings: ModelFileSettings): string {
  if (modelPath === undefined) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `${settings.model} is unset but model.task is tensor; point it at the ONNX model to serve (the default model is a text model)`,
    );
  }
  if (!isFile(modelPath)) {
    throw new SluiceError(
      "MODEL_NOT_FOUND",
      `${settings.model} = ${modelPath}: ${existsSync(modelPath) ? "not a file" : "no such file"}; point it at an ONNX model file`,
    );
  }
  return modelPath;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
