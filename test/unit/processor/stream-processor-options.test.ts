import type { Kafka } from "kafkajs";
import { describe, expect, it } from "vitest";
import { defaultConfig, maxBatchSize } from "../../../src/config/config-schema.js";
import { RequestDecoder } from "../../../src/contracts/request-codec.js";
import { RequestWriterSchemas } from "../../../src/contracts/request-writer-schemas.js";
import { ResultEncoder } from "../../../src/contracts/result-codec.js";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { classify } from "../../../src/kafka/write/produce-failure.js";
import type { ModelPort } from "../../../src/model/model-port.js";
import { resolveProcessorOptions } from "../../../src/processor/stream-processor-options.js";

const base = {
  kafka: {} as Kafka,
  model: {} as ModelPort,
  events: new SluiceEvents(),
  groupId: "g",
  requestTopics: ["req"],
  resultsTopic: "res",
  deadLetterTopic: "dlq",
  dedupChangelogBase: "dedup",
};

describe("resolveProcessorOptions", () => {
  it("takes ready-made registry codecs; avro-registry without them is CONFIG_INVALID", () => {
    const writerSchemas = new RequestWriterSchemas(async () => ({ notFound: "none" }));
    const codecs = {
      requestDecoder: new RequestDecoder({
        defaultCodec: "avro-registry",
        maxMessageBytes: 100,
        writerSchemas,
      }),
      resultEncoder: new ResultEncoder({ codec: "avro-registry", registrySchemaId: 3 }),
    };
    const o = resolveProcessorOptions({
      ...base,
      requestCodec: "avro-registry",
      resultCodec: "avro-registry",
      schemaRetryInitialMs: 50,
      schemaRetryMaxMs: 400,
      codecs,
    });
    expect(o.codecs).toBe(codecs);
    expect([o.schemaRetryInitialMs, o.schemaRetryMaxMs]).toEqual([50, 400]);
    expect(() => resolveProcessorOptions({ ...base, resultCodec: "avro-registry" })).toThrow(
      /resultCodec avro-registry needs codecs/,
    );
  });

  it("fills documented defaults", () => {
    const o = resolveProcessorOptions(base);
    expect(o.maxInFlightBatches).toBe(2);
    expect(o.commitIntervalMs).toBe(100);
    expect(o.maxQueuedRecords).toBe(8000);
    expect(o.defaultTimeoutMs).toBe(30_000);
  });

  it("rejects bad values with CONFIG_INVALID and a hint", () => {
    expect(() => resolveProcessorOptions({ ...base, maxInFlightBatches: 0 })).toThrow(
      /maxInFlightBatches must be a positive/,
    );
    expect(() => resolveProcessorOptions({ ...base, commitIntervalMs: 60_000 })).toThrow(
      /below transactionTimeoutMs/,
    );
    expect(() => resolveProcessorOptions({ ...base, maxQueuedRecords: 4, maxBatchSize: 8 })).toThrow(
      /at least maxBatchSize/,
    );
    expect(() => resolveProcessorOptions({ ...base, resultsTopic: "req" })).toThrow(/also an output topic/);
    expect(() => resolveProcessorOptions({ ...base, requestTopics: [] })).toThrow(/no request topics/);
  });
});

describe("classify (transaction errors)", () => {
  it("recognises fencing through kafkajs retry wrappers", () => {
    const inner = Object.assign(new Error("Producer attempted an operation with an old epoch"), {
      type: "INVALID_PRODUCER_EPOCH",
    });
    const wrapped = Object.assign(new Error("retries exhausted"), { originalError: inner });
    expect(classify(wrapped, "t", 3, "committing").code).toBe("PRODUCER_FENCED");
    expect(classify(wrapped, "t", 3, "committing").context).toEqual({ topic: "t", partition: 3 });
  });

  it("treats other failures as retriable TRANSACTION_FAILED", () => {
    const e = classify(new Error("Request timed out"), "t", 0, "committing");
    expect(e.code).toBe("TRANSACTION_FAILED");
    expect(e.retriable).toBe(true);
  });
});

describe("resolveProcessorOptions: one home for defaults and rules", () => {
  it("takes every default from the configuration schema", () => {
    const o = resolveProcessorOptions(base);
    const d = defaultConfig();
    expect(o.maxBatchSize).toBe(maxBatchSize(d.batching, d.model.task));
    expect(o.dedupTtlMs).toBe(d.delivery.dedupTtlMs);
    expect(o.sessionTimeoutMs).toBe(d.consumer.sessionTimeoutMs);
    expect(o.restoreTimeoutMs).toBe(d.consumer.restoreTimeoutMs);
    expect(o.restoreRetryMs).toBe(d.consumer.restoreRetryMs);
  });

  it("batching.maxBatchSize auto follows the loaded model's task; a number given wins", () => {
    const tensor = { ...base, model: { task: "tensor" } as ModelPort };
    expect(resolveProcessorOptions({ ...base, model: { task: "embedding" } as ModelPort }).maxBatchSize).toBe(
      32,
    );
    expect(resolveProcessorOptions(tensor).maxBatchSize).toBe(256);
    expect(resolveProcessorOptions({ ...tensor, maxBatchSize: 16 }).maxBatchSize).toBe(16);
    expect(() => resolveProcessorOptions({ ...tensor, maxQueuedRecords: 100 })).toThrow(
      /maxQueuedRecords must be at least maxBatchSize \(256, auto for model.task tensor\)/,
    );
  });

  it("applies the schema's cross-field rules under option names", () => {
    expect(() => resolveProcessorOptions({ ...base, heartbeatIntervalMs: 40_000 })).toThrow(
      /StreamProcessor: heartbeatIntervalMs must be below sessionTimeoutMs \(30000\)/,
    );
    expect(() => resolveProcessorOptions({ ...base, maxBatchSize: 1.5 })).toThrow(/maxBatchSize/);
  });

  it("does not judge a loaded model's batch tokens by the configuration's default sequence length", () => {
    expect(resolveProcessorOptions({ ...base, maxBatchTokens: 64 }).maxBatchTokens).toBe(64);
  });
});
