import type { ModelSettings } from "../config/model-settings.js";
import { TensorModelRunner } from "./tensor-model-runner.js";
import { TextModelRunner } from "./text-model-runner.js";

/** A loaded model of either kind: text (tokenizer + embedding/classification) or tensor. */
export type LoadedModel = TextModelRunner | TensorModelRunner;

/** Loads the model `model.task` names: `TensorModelRunner` for tensor, `TextModelRunner` for text tasks. */
export function loadModel(settings: ModelSettings): Promise<LoadedModel> {
  return settings.task === "tensor" ? TensorModelRunner.create(settings) : TextModelRunner.create(settings);
}
