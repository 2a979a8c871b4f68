/**
 * Every span name and attribute name Sluice writes, in one place (docs/observability.md, "Tracing").
 * The `messaging.*` names are OpenTelemetry's messaging semantic conventions (Kafka); they are
 * still "development" there, so they are copied here as the conventions advise, and
 * test/unit/tracing/span-attributes.test.ts checks them against the semantic-conventions package.
 * The `sluice.*` names are Sluice's own. Values are ids, counts, codes and timings: never request
 * text, embeddings, keys or request ids (request attribute values only where a user opted in with
 * `tracing.requestAttributes`).
 */
export const ATTR = {
  messagingSystem: "messaging.system",
  messagingOperationType: "messaging.operation.type",
  messagingOperationName: "messaging.operation.name",
  messagingDestinationName: "messaging.destination.name",
  messagingConsumerGroupName: "messaging.consumer.group.name",
  messagingDestinationPartitionId: "messaging.destination.partition.id",
  messagingKafkaOffset: "messaging.kafka.offset",
  messagingBatchMessageCount: "messaging.batch.message_count",

  /** `online` or `backfill`. */
  lane: "sluice.lane",
  /** The backfill run of a request (its `sluice.run-id` header). */
  runId: "sluice.run_id",
  /** Why the micro-batch flushed: size, tokens, wait, deadline, fill, shutdown. */
  flushReason: "sluice.batch.flush_reason",
  /** What the request ended as: result, dead_letter or duplicate. */
  outcome: "sluice.outcome",
  /** A result's status: ok, expired, rejected, error or fallback. */
  resultStatus: "sluice.result.status",
  /** Why the fallback rules answered: deadline, model_error or overload. */
  fallbackReason: "sluice.fallback.reason",
  /** A dead letter's or failed result's error code (DECODE_FAILED, INFERENCE_FAILED, ...). */
  errorCode: "sluice.error.code",
  /** The stage a dead letter failed in: decode, validate, model, deliver. */
  deadLetterStage: "sluice.dead_letter.stage",
  /** A transaction's end: committed, aborted, fenced or failed. */
  transactionOutcome: "sluice.transaction.outcome",
  modelName: "sluice.model.name",
  modelVersion: "sluice.model.version",
  /** Items sent to the model in one call. */
  modelItems: "sluice.model.items",
  /** Tokens of those items (0 when the model cannot count them). */
  modelTokens: "sluice.model.tokens",

  /** Request timings, ms: intake (decode, dedup), queue (waiting for a batch), inference, commit. */
  intakeMs: "sluice.intake_ms",
  queueMs: "sluice.queue_ms",
  inferenceMs: "sluice.inference_ms",
  commitMs: "sluice.commit_ms",
} as const;

/** Resource attributes beside service.name and service.version (stable semantic conventions). */
export const RESOURCE_ATTR = {
  serviceInstanceId: "service.instance.id",
} as const;

/** Prefix of the opted-in request attributes: `sluice.request.attribute.<name>`. */
export const REQUEST_ATTRIBUTE_PREFIX = "sluice.request.attribute.";

export const MESSAGING_SYSTEM_KAFKA = "kafka";
export const OPERATION_TYPE_PROCESS = "process";
export const OPERATION_TYPE_SETTLE = "settle";

/** Span names: `<operation> <topic>`, as the messaging conventions name them. */
export const SPAN_NAME = {
  /** One request, intake to commit; parented to the request's own trace context. */
  request: (topic: string) => `request ${topic}`,
  /** One micro-batch; `process` alone when its requests come from several topics. */
  batch: (topic: string | undefined) => (topic === undefined ? "process" : `process ${topic}`),
  /** One model call of a micro-batch. */
  modelCall: (model: string | undefined) => (model === undefined ? "infer" : `infer ${model}`),
  /** One transaction of an input partition: results sent, offsets and commit. */
  transaction: (topic: string) => `commit ${topic}`,
} as const;

/** Span events (Zipkin annotations). */
export const SPAN_EVENT = {
  /** A transaction's records were sent; the commit follows. */
  sent: "sent",
} as const;
