import type { Kafka } from "kafkajs";
import type { SluiceConfig } from "../config/config-schema.js";
import type { Codec } from "../contracts/codec.js";
import type { ModelPort } from "../model/model-port.js";
import type { SluiceEvents } from "../observability/sluice-events.js";
import { SluiceError } from "../sluice-error.js";

/** Structured log sink (a pino logger fits). Never pass request text in `obj`. */
export interface ProcessorLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface StreamProcessorOptions {
  kafka: Kafka;
  /** Loaded model; the processor does not close it (its creator does). */
  model: ModelPort;
  events: SluiceEvents;
  log?: ProcessorLog;
  groupId: string;
  requestTopics: string[];
  resultsTopic: string;
  deadLetterTopic: string;
  /** Base name; the changelog of request topic T is `<base>.<groupId>.<T>` (see topic-admin.ts). */
  dedupChangelogBase: string;
  /** Codec for request records without a content-type header. Default json. */
  requestCodec?: Codec;
  /** Codec of the results topic. Default json. */
  resultCodec?: Codec;
  /** Larger request values are dead-lettered as PAYLOAD_TOO_LARGE, bytes. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Deadline of requests without deadlineMs: record timestamp + this, ms. Default 30000. */
  defaultTimeoutMs?: number;
  /** Dedup memory per input partition, ms. Default 24 h. */
  dedupTtlMs?: number;
  /**
   * Dedup entries per instance, divided evenly over the assigned input partitions (floor, at least 1
   * each; recomputed on every assignment). Default 1000000.
   */
  dedupMaxEntries?: number;
  /** Default 32. */
  maxBatchSize?: number;
  /** Default 8192. */
  maxBatchTokens?: number;
  /** Default 10 ms. */
  maxWaitMs?: number;
  /** Batches inferring concurrently. Default 2 (batch k+1 forms while k runs). */
  maxInFlightBatches?: number;
  /** Records taken from Kafka and not yet committed (queued, inferring, or waiting for their transaction) before the consumer pauses. Default 2000. */
  maxQueuedRecords?: number;
  /**
   * true (default): results, dead letters, changelog and the input offset commit together in one
   * Kafka transaction per input partition (exactly-once-style, docs/exactly-once.md). false:
   * at-least-once: an idempotent producer sends them, then the consumer commits the offset; a crash
   * between the two republishes (docs/exactly-once.md, "At-least-once mode").
   */
  transactions?: boolean;
  /** Transaction cadence per input partition, ms (0 = commit as soon as something completes). Default 100. */
  commitIntervalMs?: number;
  /** Default 60000 ms. */
  transactionTimeoutMs?: number;
  /** Most input records per transaction; the rest of what is complete commits right after. Default 500. */
  maxTransactionRecords?: number;
  /**
   * Most estimated output bytes per transaction (key + value + headers); also caps a dead letter,
   * whose value is cut to fit (min with 512 KiB). Default 524288 (half the broker's default message.max.bytes).
   */
  maxTransactionBytes?: number;
  /** Default 30000 ms. */
  sessionTimeoutMs?: number;
  /** Default 3000 ms. */
  heartbeatIntervalMs?: number;
  /** Default 1 MiB. */
  maxBytesPerPartition?: number;
  /** Longest changelog restore before it is retried, ms. Default 60000. */
  restoreTimeoutMs?: number;
  /** Wait before retrying a failed partition restore, ms. Default 1000. */
  restoreRetryMs?: number;
}

export type ResolvedProcessorOptions = Required<Omit<StreamProcessorOptions, "log">> & { log: ProcessorLog };

const silentLog: ProcessorLog = { info: () => {}, warn: () => {}, error: () => {} };

export function resolveProcessorOptions(o: StreamProcessorOptions): ResolvedProcessorOptions {
  const r: ResolvedProcessorOptions = {
    requestCodec: "json",
    resultCodec: "json",
    maxMessageBytes: 1_048_576,
    defaultTimeoutMs: 30_000,
    dedupTtlMs: 24 * 60 * 60 * 1000,
    dedupMaxEntries: 1_000_000,
    maxBatchSize: 32,
    maxBatchTokens: 8192,
    maxWaitMs: 10,
    maxInFlightBatches: 2,
    maxQueuedRecords: 2000,
    transactions: true,
    commitIntervalMs: 100,
    transactionTimeoutMs: 60_000,
    maxTransactionRecords: 500,
    maxTransactionBytes: 512 * 1024,
    sessionTimeoutMs: 30_000,
    heartbeatIntervalMs: 3000,
    maxBytesPerPartition: 1_048_576,
    restoreTimeoutMs: 60_000,
    restoreRetryMs: 1000,
    ...stripUndefined(o),
    log: o.log ?? silentLog,
  } as ResolvedProcessorOptions;
  const positive: (keyof ResolvedProcessorOptions)[] = [
    "maxMessageBytes",
    "defaultTimeoutMs",
    "dedupTtlMs",
    "dedupMaxEntries",
    "maxBatchSize",
    "maxBatchTokens",
    "maxInFlightBatches",
    "maxQueuedRecords",
    "transactionTimeoutMs",
    "maxTransactionRecords",
    "maxTransactionBytes",
    "sessionTimeoutMs",
    "heartbeatIntervalMs",
    "maxBytesPerPartition",
    "restoreTimeoutMs",
    "restoreRetryMs",
  ];
  for (const k of positive) {
    const v = r[k];
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `StreamProcessor: ${k} must be a positive number, got ${String(v)}`,
      );
    }
  }
  if (
    !Number.isFinite(r.commitIntervalMs) ||
    r.commitIntervalMs < 0 ||
    r.commitIntervalMs >= r.transactionTimeoutMs
  ) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `StreamProcessor: commitIntervalMs must be >= 0 and below transactionTimeoutMs (${r.transactionTimeoutMs}), got ${r.commitIntervalMs}`,
    );
  }
  if (typeof r.transactions !== "boolean") {
    throw new SluiceError(
      "CONFIG_INVALID",
      `StreamProcessor: transactions must be true or false, got ${String(r.transactions)}`,
    );
  }
  if (r.maxQueuedRecords < r.maxBatchSize) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `StreamProcessor: maxQueuedRecords (${r.maxQueuedRecords}) must be at least maxBatchSize (${r.maxBatchSize})`,
    );
  }
  if (r.requestTopics.length === 0)
    throw new SluiceError("CONFIG_INVALID", "StreamProcessor: no request topics");
  const outputs = new Set([r.resultsTopic, r.deadLetterTopic]);
  for (const t of r.requestTopics) {
    if (outputs.has(t)) {
      throw new SluiceError("CONFIG_INVALID", `StreamProcessor: request topic ${t} is also an output topic`);
    }
  }
  return r;
}

/** Options from the loaded configuration (`sluice serve`, `sluice demo`). */
export function processorOptionsFromConfig(
  config: SluiceConfig,
  deps: { kafka: Kafka; model: ModelPort; events: SluiceEvents; log?: ProcessorLog },
): StreamProcessorOptions {
  return {
    ...deps,
    groupId: config.consumer.groupId,
    requestTopics: [...config.topics.requests],
    resultsTopic: config.topics.results,
    deadLetterTopic: config.topics.deadLetters,
    dedupChangelogBase: config.topics.dedupChangelog,
    requestCodec: config.topics.requestCodec,
    resultCodec: config.topics.resultCodec,
    maxMessageBytes: config.delivery.maxMessageBytes,
    defaultTimeoutMs: config.delivery.defaultTimeoutMs,
    dedupTtlMs: config.delivery.dedupTtlMs,
    dedupMaxEntries: config.delivery.dedupMaxEntries,
    maxBatchSize: config.batching.maxBatchSize,
    maxBatchTokens: config.batching.maxBatchTokens,
    maxWaitMs: config.batching.maxWaitMs,
    maxInFlightBatches: config.batching.maxInFlightBatches,
    maxQueuedRecords: config.batching.maxQueuedRecords,
    transactions: config.delivery.transactions,
    commitIntervalMs: config.delivery.commitIntervalMs,
    transactionTimeoutMs: config.delivery.transactionTimeoutMs,
    maxTransactionRecords: config.delivery.maxTransactionRecords,
    maxTransactionBytes: config.delivery.maxTransactionBytes,
    sessionTimeoutMs: config.consumer.sessionTimeoutMs,
    heartbeatIntervalMs: config.consumer.heartbeatIntervalMs,
    maxBytesPerPartition: config.consumer.maxBytesPerPartition,
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
