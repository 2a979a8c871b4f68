/**
 * Sluice's public client API (the package entry point). Keep it small: what a producer of requests
 * or a consumer of results needs. Engineers add exports here; the CLI is not part of it.
 */

export {
  type FreshnessHeartbeat,
  type ReadFreshnessOptions,
  readFreshness,
} from "./client/freshness-reader.js";
export type {
  InferenceOutput,
  InferenceRequest,
  InferenceResult,
  ModelIdentity,
  ResultStatus,
} from "./contracts/inference.js";
export { isSluiceError, SluiceError, type SluiceErrorCode } from "./sluice-error.js";
