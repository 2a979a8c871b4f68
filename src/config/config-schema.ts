import { hostname } from "node:os";
import { z } from "zod";
import { DEFAULT_FRESHNESS_TOPIC } from "../contracts/freshness-heartbeat.js";
import { positiveInt, topicName } from "./config-fields.js";
import { costSchema } from "./cost-config-schema.js";
import { kafkaSchema } from "./kafka-config-schema.js";
import { lanesSchema } from "./lanes-config-schema.js";
import { candidateSchema, modelSchema } from "./model-config-schema.js";
import { schemaRegistrySchema } from "./schema-registry-config-schema.js";
import { tracingSchema } from "./tracing-config-schema.js";

export { candidateSchema, MODEL_INPUTS, modelSchema } from "./model-config-schema.js";

/**
 * The one typed configuration of Sluice. Every key is documented with `.describe()`; defaults and
 * units live here and nowhere else. `docs/configuration.md` and the README mirror this file.
 *
 * Sections use `prefault({})` (not `default({})`) so that a missing section is parsed like an empty
 * object and picks up each field's default (zod 4 returns `default` values without parsing them).
 * Objects are strict: an unknown key is a typo and fails loudly instead of being ignored.
 *
 * Components take resolved options (no defaults of their own for configurable values, the pure
 * LaneBatcher and Deduplicator included); `resolveProcessorOptions` and `modelSettings` validate
 * programmatic options through this same schema. This folder imports no pipeline room (`delivery`,
 * `microbatch`, `model`, ...): they depend on it, never the other way (`npm run arch`).
 */

export const topicsSchema = z
  .strictObject({
    requests: z
      .array(topicName())
      .min(1, { error: "no request topics: name at least one" })
      .default(["sluice.requests"])
      .describe("Request topics to consume (one or more)."),
    backfill: z
      .array(topicName())
      .default([])
      .describe("Backfill topics: a second, lower-priority lane consumed by the same group (docs/lanes.md)."),
    results: topicName().default("sluice.results").describe("Topic results are published to."),
    deadLetters: topicName()
      .default("sluice.dead-letters")
      .describe("Topic for records that cannot be processed (raw record + error headers)."),
    dedupChangelog: topicName()
      .default("sluice.dedup-changelog")
      .describe(
        "Base name of the compacted dedup changelogs, one per group and request topic: <base>.<groupId>.<topic>.",
      ),
    freshness: topicName().default(DEFAULT_FRESHNESS_TOPIC).describe("Topic for freshness heartbeats."),
    runs: topicName()
      .default("sluice.runs")
      .describe(
        "Compacted topic of backfill run manifests, keyed by run id, and of the runs' cost shares that serve writes (keys cost/<runId>/…); created by the first submit, or by serve when topics.backfill is set.",
      ),
    modelControl: topicName()
      .default("sluice.model-control")
      .describe(
        "Compacted topic of the group's model decisions (sluice model promote|rollback) and each partition's switch boundary; created by serve (docs/model-upgrades.md).",
      ),
    shadowResults: topicName()
      .default("sluice.shadow-results")
      .describe(
        "Topic the candidate's shadow results go to (candidate.shadowShare > 0), in the result format; never topics.results (docs/model-upgrades.md).",
      ),
    backfillResults: topicName()
      .optional()
      .describe("Topic results of the backfill lane go to; unset = topics.results."),
    requestCodec: z
      .enum(["json", "avro", "avro-registry", "v2-json"])
      .default("json")
      .describe(
        "Encoding of request records (avro-registry = schema registry wire format, needs schemaRegistry.url; v2-json = Open Inference Protocol JSON, docs/contracts.md).",
      ),
    resultCodec: z
      .enum(["json", "avro", "avro-registry", "v2-json"])
      .default("json")
      .describe(
        "Encoding of result records (avro-registry = schema registry wire format, needs schemaRegistry.url; v2-json = Open Inference Protocol JSON, docs/contracts.md).",
      ),
    partitions: positiveInt().default(3).describe("Partitions used when Sluice creates topics."),
    replicationFactor: positiveInt()
      .default(1)
      .describe("Replication factor used when Sluice creates topics."),
  })
  .describe("Topic names and codecs.");

export const consumerSchema = z
  .strictObject({
    groupId: z.string().min(1).default("sluice").describe("Consumer group id."),
    sessionTimeoutMs: positiveInt().default(30_000).describe("Consumer group session timeout, ms."),
    heartbeatIntervalMs: positiveInt()
      .default(3000)
      .describe("Consumer heartbeat interval, ms; must be below sessionTimeoutMs."),
    maxBytesPerPartition: positiveInt()
      .default(1_048_576)
      .describe("Max bytes fetched per partition, bytes."),
    restoreTimeoutMs: positiveInt()
      .default(60_000)
      .describe("Longest read of a partition's dedup changelog before the restore is retried, ms."),
    restoreRetryMs: positiveInt()
      .default(1000)
      .describe("Wait before retrying a failed partition restore, ms."),
  })
  .describe("Kafka consumer settings.");

/**
 * `batching.maxBatchSize: auto`, per kind of model (docs/batching.md). A text model's call costs
 * grow with every item (tokens, padding: bench:model's sweep put the knee at 32). A tensor model's
 * rows cost next to nothing in ORT (a logistic regression scores millions a second), so what a
 * batch costs is per call — the hand-over to a worker thread, the batch's events and log line — and
 * 256 rows amortise it: at the Kafka-path ceiling (bench:ceiling, logistic regression) 32 rows per
 * call gave 20.5–24k results/s, 256–1024 gave 30.8–35.6k (BENCHMARKS.md, "Tensor batches").
 */
export const AUTO_MAX_BATCH_SIZE = { text: 32, tensor: 256 } as const;

/** The micro-batch size in force: `batching.maxBatchSize`, with `auto` resolved for `model.task` (the one home of that rule). */
export function maxBatchSize(
  batching: Pick<SluiceConfig["batching"], "maxBatchSize">,
  task: SluiceConfig["model"]["task"],
): number {
  if (batching.maxBatchSize !== "auto") return batching.maxBatchSize;
  return task === "tensor" ? AUTO_MAX_BATCH_SIZE.tensor : AUTO_MAX_BATCH_SIZE.text;
}

export const batchingSchema = z
  .strictObject({
    maxBatchSize: z
      .union([z.literal("auto"), z.number().int().min(1).max(4096)])
      .default("auto")
      .describe(
        `Max requests per micro-batch (1..4096), or auto = ${AUTO_MAX_BATCH_SIZE.text} for text models (model.task embedding, classification) and ${AUTO_MAX_BATCH_SIZE.tensor} for model.task tensor (docs/batching.md).`,
      ),
    maxBatchTokens: positiveInt()
      .default(8192)
      .describe("Max padded tokens per micro-batch (batch size x longest sequence)."),
    maxWaitMs: z
      .number()
      .int()
      .min(0)
      .default(10)
      .describe("Longest time the first queued request waits for a batch to fill, ms."),
    maxInFlightBatches: positiveInt().default(2).describe("Batches being inferred at the same time."),
    // 8000: at the Kafka-path ceiling (3 partitions, ~13k results/s) the records of the transactions
    // being filled and committed alone reached 2000, the earlier default, and paused the consumer.
    maxQueuedRecords: positiveInt()
      .default(8000)
      .describe("Records taken and not yet committed before the consumer pauses (backpressure)."),
    bucketing: z
      .boolean()
      .default(true)
      .describe("Sort a batch by token length to reduce padding (order is restored)."),
  })
  .describe("Micro-batching policy.");

export const deliverySchema = z
  .strictObject({
    transactions: z
      .boolean()
      .default(true)
      .describe("Publish results in Kafka transactions (exactly-once-style); false = at-least-once."),
    commitIntervalMs: z
      .number()
      .int()
      .min(0)
      .default(100)
      .describe("How long a transaction may stay open collecting batches, ms (0 = commit every batch)."),
    transactionTimeoutMs: positiveInt()
      .default(60_000)
      .describe("Broker-side transaction timeout, ms; must exceed commitIntervalMs."),
    dedupTtlMs: positiveInt()
      .default(24 * 60 * 60 * 1000)
      .describe("How long a request id is remembered for deduplication, ms."),
    dedupMaxEntries: positiveInt()
      .default(1_000_000)
      .describe(
        "Max remembered request ids per instance, split evenly over its assigned partitions (oldest evicted first).",
      ),
    maxTransactionRecords: positiveInt()
      .default(2000)
      .describe("Most input records per transaction; the rest of what is complete commits right after."),
    maxTransactionBytes: positiveInt()
      .default(2_097_152)
      .describe(
        "Most output bytes (key + value + headers) per serve transaction; every send (of any writer) holds at most this and at most 512 KiB; dead-letter values are cut to fit, bytes.",
      ),
    maxMessageBytes: positiveInt()
      .default(1_048_576)
      .describe("Largest request record accepted; bigger ones are dead-lettered, bytes."),
    defaultTimeoutMs: positiveInt()
      .default(30_000)
      .describe("Deadline applied to requests without deadlineMs, ms after the record timestamp."),
  })
  .describe("Delivery guarantees and deduplication.");

export const fallbackSchema = z
  .strictObject({
    rulesPath: z
      .string()
      .min(1)
      .optional()
      .describe(
        "YAML file of fallback rules for online requests of a classification model (docs/lanes.md); unset = no fallback.",
      ),
    maxOnlineQueue: positiveInt()
      .default(512)
      .describe("Online requests held (queued or inferring) at which new ones get the fallback (overload)."),
  })
  .describe("Fallback answers when the model misses its SLA.");

export const observabilitySchema = z
  .strictObject({
    metricsHost: z.string().min(1).default("127.0.0.1").describe("Address the metrics/health server binds."),
    metricsPort: z
      .number()
      .int()
      .min(0)
      .max(65_535)
      .default(9464)
      .describe("Port of the Prometheus metrics/health server (0 = any free port)."),
    ui: z
      .boolean()
      .default(true)
      .describe("Serve the live page at / of the metrics port (false: / and /ui/* 404)."),
    lagIntervalMs: positiveInt().default(5000).describe("How often consumer lag is sampled, ms."),
    heartbeatIntervalMs: positiveInt()
      .default(5000)
      .describe("How often freshness heartbeats are published, ms."),
    logLevel: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
      .default("info")
      .describe("pino log level."),
    logPayloads: z
      .boolean()
      .default(false)
      .describe("Allow request text in logs (off: payloads never reach a log)."),
    redactPaths: z.array(z.string().min(1)).default([]).describe("Extra pino redact paths."),
    instanceId: z
      .string()
      .min(1)
      .default(() => `${hostname()}-${process.pid}`)
      .describe("Name of this instance in metrics and heartbeats (default hostname-pid)."),
  })
  .describe("Metrics, logs and heartbeats.");

export const shutdownSchema = z
  .strictObject({
    timeoutMs: positiveInt()
      .default(20_000)
      .describe(
        "Longest graceful stop on SIGTERM, ms: finish formed and in-flight batches, commit, leave the group; records fetched but not started are left to the next owner. Set container grace periods above it.",
      ),
  })
  .describe("Graceful shutdown of `sluice serve`.");

export const batchSchema = z
  .strictObject({
    shardSize: positiveInt().default(10_000).describe("Rows per batch-mode shard (unit of checkpointing)."),
    idField: z.string().min(1).default("id").describe("Input field holding the request id."),
    textField: z.string().min(1).default("text").describe("Input field holding the text."),
  })
  .describe("Offline batch mode.");

/** The output topics that may be neither an input nor the runs topic. */
const OUTPUT_TOPIC_KEYS = [
  "results",
  "deadLetters",
  "dedupChangelog",
  "freshness",
  "modelControl",
  "shadowResults",
] as const;

export const sluiceConfigSchema = z
  .strictObject({
    kafka: kafkaSchema.prefault({}),
    topics: topicsSchema.prefault({}),
    consumer: consumerSchema.prefault({}),
    batching: batchingSchema.prefault({}),
    delivery: deliverySchema.prefault({}),
    model: modelSchema.prefault({}),
    candidate: candidateSchema.optional(),
    fallback: fallbackSchema.prefault({}),
    lanes: lanesSchema.prefault({}),
    observability: observabilitySchema.prefault({}),
    batch: batchSchema.prefault({}),
    shutdown: shutdownSchema.prefault({}),
    schemaRegistry: schemaRegistrySchema.prefault({}),
    cost: costSchema.prefault({}),
    tracing: tracingSchema.prefault({}),
  })
  .superRefine((c, ctx) => {
    // Cross-field rules: each names both keys so the fix is obvious.
    if (c.consumer.heartbeatIntervalMs >= c.consumer.sessionTimeoutMs) {
      ctx.addIssue({
        code: "custom",
        path: ["consumer", "heartbeatIntervalMs"],
        input: c.consumer.heartbeatIntervalMs,
        message: `must be below consumer.sessionTimeoutMs (${c.consumer.sessionTimeoutMs})`,
      });
    }
    if (c.delivery.commitIntervalMs >= c.delivery.transactionTimeoutMs) {
      ctx.addIssue({
        code: "custom",
        path: ["delivery", "commitIntervalMs"],
        input: c.delivery.commitIntervalMs,
        message: `must be below delivery.transactionTimeoutMs (${c.delivery.transactionTimeoutMs})`,
      });
    }
    if (c.batching.maxBatchTokens < c.model.maxSequenceTokens) {
      ctx.addIssue({
        code: "custom",
        path: ["batching", "maxBatchTokens"],
        input: c.batching.maxBatchTokens,
        message: `must be at least model.maxSequenceTokens (${c.model.maxSequenceTokens}) so one full-length request fits a batch`,
      });
    }
    if (c.candidate && c.batching.maxBatchTokens < c.candidate.maxSequenceTokens) {
      ctx.addIssue({
        code: "custom",
        path: ["batching", "maxBatchTokens"],
        input: c.batching.maxBatchTokens,
        message: `must be at least candidate.maxSequenceTokens (${c.candidate.maxSequenceTokens}) so one full-length request fits a batch`,
      });
    }
    if (
      c.candidate &&
      c.candidate.task !== c.model.task &&
      [c.candidate.task, c.model.task].includes("tensor")
    ) {
      ctx.addIssue({
        code: "custom",
        path: ["candidate", "task"],
        input: c.candidate.task,
        message: `must be a text task like model.task (${c.model.task}), or both tensor: requests of one topic are either text or tensors`,
      });
    }
    const batchSize = maxBatchSize(c.batching, c.model.task);
    if (c.batching.maxQueuedRecords < batchSize) {
      ctx.addIssue({
        code: "custom",
        path: ["batching", "maxQueuedRecords"],
        input: c.batching.maxQueuedRecords,
        message: `must be at least batching.maxBatchSize (${batchSize}${c.batching.maxBatchSize === "auto" ? `, auto for model.task ${c.model.task}` : ""}) or batches never fill`,
      });
    }
    if (c.model.task === "tensor" && c.topics.resultCodec !== "json" && c.topics.resultCodec !== "v2-json") {
      ctx.addIssue({
        code: "custom",
        path: ["topics", "resultCodec"],
        input: c.topics.resultCodec,
        message:
          "must be json or v2-json when model.task is tensor (the Avro result schema has no tensor outputs)",
      });
    }
    for (const key of ["requestCodec", "resultCodec"] as const) {
      if (c.topics[key] === "avro-registry" && c.schemaRegistry.url === undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["schemaRegistry", "url"],
          input: undefined,
          message: `must be set when topics.${key} is avro-registry`,
        });
      }
    }
    if (c.schemaRegistry.retryInitialMs > c.schemaRegistry.retryMaxMs) {
      ctx.addIssue({
        code: "custom",
        path: ["schemaRegistry", "retryInitialMs"],
        input: c.schemaRegistry.retryInitialMs,
        message: `must be at most schemaRegistry.retryMaxMs (${c.schemaRegistry.retryMaxMs})`,
      });
    }
    const inputs = new Set(c.topics.requests);
    for (const key of OUTPUT_TOPIC_KEYS) {
      if (inputs.has(c.topics[key])) {
        ctx.addIssue({
          code: "custom",
          path: ["topics", key],
          input: c.topics[key],
          message:
            "must differ from every topic in topics.requests: a request topic that is also an output topic would make Sluice consume its own output",
        });
      }
    }
    // The backfill lane (docs/lanes.md): its topics are inputs, so they may be neither online inputs
    // nor outputs.
    for (const topic of c.topics.backfill) {
      if (inputs.has(topic)) {
        ctx.addIssue({
          code: "custom",
          path: ["topics", "backfill"],
          input: c.topics.backfill,
          message: `"${topic}" is also in topics.requests: a topic is either online (topics.requests) or backfill (topics.backfill), not both`,
        });
      }
    }
    const backfill = new Set(c.topics.backfill);
    for (const key of OUTPUT_TOPIC_KEYS) {
      if (backfill.has(c.topics[key])) {
        ctx.addIssue({
          code: "custom",
          path: ["topics", "backfill"],
          input: c.topics.backfill,
          message: `"${c.topics[key]}" is also topics.${key}: a backfill topic that is also an output topic would make Sluice consume its own output`,
        });
      }
    }
    // Backfill runs (docs/lanes.md, "Backfill runs"): the runs topic and the backfill results topic are
    // outputs, so neither may be an input; the runs topic is compacted and holds manifests and cost shares only.
    const allInputs = new Set([...c.topics.requests, ...c.topics.backfill]);
    const backfillOutputs = [
      ["runs", c.topics.runs],
      ["backfillResults", c.topics.backfillResults],
    ] as const;
    for (const [key, topic] of backfillOutputs) {
      if (topic !== undefined && allInputs.has(topic)) {
        ctx.addIssue({
          code: "custom",
          path: ["topics", key],
          input: topic,
          message:
            "must differ from every topic in topics.requests and topics.backfill: Sluice would consume its own output",
        });
      }
    }
    const runsClash = ([...OUTPUT_TOPIC_KEYS, "backfillResults"] as const).find(
      (key) => c.topics[key] === c.topics.runs,
    );
    if (runsClash) {
      ctx.addIssue({
        code: "custom",
        path: ["topics", "runs"],
        input: c.topics.runs,
        message: `must differ from topics.${runsClash}: the runs topic is compacted and holds run manifests only`,
      });
    }
    const shadowClash = (["results", "backfillResults", "runs", "modelControl"] as const).find(
      (key) => c.topics[key] === c.topics.shadowResults,
    );
    if (shadowClash) {
      ctx.addIssue({
        code: "custom",
        path: ["topics", "shadowResults"],
        input: c.topics.shadowResults,
        message: `must differ from topics.${shadowClash}: shadow results never mix with what readers of that topic consume`,
      });
    }
  })
  .describe("Sluice configuration.");

/** Where backfill results go: `topics.backfillResults`, else `topics.results` (the one home of that default). */
export function backfillResultsTopic(topics: SluiceConfig["topics"]): string {
  return topics.backfillResults ?? topics.results;
}

/** The configuration with every default applied (what an empty file and no overrides give). */
export function defaultConfig(): SluiceConfig {
  return sluiceConfigSchema.parse({});
}

/** The effective, fully defaulted configuration. */
export type SluiceConfig = z.output<typeof sluiceConfigSchema>;
/** What a YAML file or overrides may contain: every key optional. */
export type SluiceConfigInput = z.input<typeof sluiceConfigSchema>;
