import type { ModelSettings } from "../config/model-settings.js";
import { ModelRunner } from "./model-runner.js";
import { TensorModelRunner } from "./tensor-model-runner.js";

/** A loaded model of either kind: text (tokenizer + embedding/classification) or tensor. */
export type LoadedModel = ModelRunner | TensorModelRunner;

/** Loads the model `model.task` names: `TensorModelRunner` for tensor, `ModelRunner` for text tasks. */
export function loadModel(settings: ModelSettings): Promise<LoadedModel> {
  return settings.task === "tensor" ? TensorModelRunner.create(settings) : ModelRunner.create(settings);
}
