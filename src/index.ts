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
export { encodeRequest } from "./contracts/request-codec.js";
export { decodeResult } from "./contracts/result-codec.js";
/**
 * kafkajs 2.2.4 can hand aborted transactional records to read_committed consumers when
 * transactions abort out of order (which fencing causes). Call this once before consuming Sluice's
 * results topic with kafkajs. Other Kafka clients (Java, librdkafka/kcat) are not affected.
 */
export { fixAbortedTransactionOrder } from "./kafka/protocol/aborted-transaction-order.js";
export { isSluiceError, SluiceError, type SluiceErrorCode } from "./sluice-error.js";
