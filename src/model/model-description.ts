import type { ModelIdentity } from "../contracts/inference.js";
import type { ModelTask } from "./model-port.js";
import type { FeedNames, TensorInfo } from "./worker-protocol.js";

/** What a loaded model is and how Sluice feeds it: `TextModelRunner.description`, printed by `sluice model info`. */
export interface ModelDescription {
  identity: ModelIdentity;
  task: ModelTask;
  modelSha256: string;
  tokenizerSha256: string;
  inputs: TensorInfo[];
  outputs: TensorInfo[];
  feeds: FeedNames;
  outputName: string;
  /** Embedding size or number of classes, when the output shape states it. */
  outputSize: number | null;
  labels: string[] | null;
  maxSequenceTokens: number;
  /** The graph quantizes activations per tensor, so batch neighbours change an item's output. */
  batchDependent: boolean;
  /** Effective: each item runs alone (see `model.itemIsolation`). */
  isolateItems: boolean;
}
