import { resolve } from "node:path";
import { BatchJob, type BatchRunMode } from "../batch/batch-job.js";
import type { BatchProgressSink } from "../batch/batch-progress-sink.js";
import type { BatchRunSummary } from "../batch/batch-run-summary.js";
import type { BatchSink } from "../batch/batch-sink.js";
import type { BatchSource } from "../batch/batch-source.js";
import { FileSource } from "../batch/file-source.js";
import { PartFileSink } from "../batch/part-file-sink.js";
import type { SluiceConfig } from "../config/config-schema.js";
import type { ModelSettings } from "../config/model-settings.js";
import { RequestDecoder } from "../contracts/request-codec.js";
import { createKafka } from "../kafka/kafka-client.js";
import { KafkaRangeSource } from "../kafka/kafka-range-source.js";
import { KafkaTopicSink } from "../kafka/kafka-topic-sink.js";
import { ModelRunner } from "../model/model-runner.js";
import { modelRunnerOptionsFromConfig } from "../model/model-runner-config.js";
import { resolveWorkerCount } from "../model/worker-count.js";
import { SluiceError } from "../sluice-error.js";
import { type BatchSeams, installedBatchSeams } from "./batch-seams.js";
import { createWireCodecs, type WireCodecs } from "./wire-codecs.js";

/** One offline run as `sluice batch` asks for it; unset (undefined) fields come from the configuration. */
export interface BatchRunRequest {
  /** FILE.jsonl, FILE.csv or kafka:TOPIC. */
  input: string;
  /** A directory for part files, or kafka:TOPIC. */
  output: string;
  /** Part file format: jsonl or avro. Default jsonl. */
  format?: string;
  /** File input format: jsonl or csv. Default: from the file extension. */
  inputFormat?: string;
  /** Default config batch.idField. */
  idField?: string;
  /** Default config batch.textField. */
  textField?: string;
  /** Rows per shard. Default config batch.shardSize. */
  shardSize?: number;
  /** Items per model call. Default config batching.maxBatchSize. */
  batchSize?: number;
  /** Topic inputs only: range start and (exclusive) end specs (src/batch/offset-spec.ts). */
  from?: string;
  to?: string;
  /** Manifest/failures directory. Default: the output directory, or .sluice/batch/<topic> for a topic output. */
  stateDir?: string;
  /** Default resume. */
  mode?: BatchRunMode;
}

export interface BatchRuntimeOptions {
  /** Where progress counts go (the CLI passes its progress bar). Default: nowhere. */
  progress?: BatchProgressSink;
  /** Test seams (./batch-seams.ts). Default: those installed in this process, which production never sets. */
  seams?: BatchSeams;
}

export interface BatchRuntime {
  /** Runs the job once (resume, new run or retry round, per the request's mode). */
  run(): Promise<BatchRunSummary>;
  /** Asks the run to stop after the shard in progress; `run()` then resolves "interrupted". */
  stop(): void;
  /** Closes model, source and sink. */
  close(): Promise<void>;
}

/**
 * The offline composition root: source, sink, model and `BatchJob` for one `sluice batch` invocation,
 * wired from the configuration and the request (docs/batch-mode.md). Wiring only; the job owns the logic.
 */
export async function createBatchRuntime(
  config: SluiceConfig,
  request: BatchRunRequest,
  options: BatchRuntimeOptions = {},
): Promise<BatchRuntime> {
  const seams = options.seams ?? installedBatchSeams();
  const idField = request.idField ?? config.batch.idField;
  const textField = request.textField ?? config.batch.textField;
  const kafka = () => createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-batch` });

  const inputTopic = kafkaTopic(request.input, "--input");
  const outputTopic = kafkaTopic(request.output, "--output");
  // Topic inputs and outputs use the same wire codecs as `sluice serve` (schema registry included).
  const wire: WireCodecs | undefined =
    inputTopic !== null || outputTopic !== null ? await createWireCodecs(config) : undefined;
  let { source, inputFormat } = createBatchSource(config, request, wire?.requestDecoder);

  let sink: BatchSink;
  let stateDir: string;
  if (outputTopic !== null) {
    sink = new KafkaTopicSink({
      kafka: kafka(),
      topic: outputTopic,
      codec: config.topics.resultCodec,
      encoder: await (wire as WireCodecs).resultEncoder(outputTopic),
      transactionTimeoutMs: config.delivery.transactionTimeoutMs,
      beforeCommit: seams.beforeTopicCommit,
    });
    stateDir = resolve(request.stateDir ?? `.sluice/batch/${outputTopic}`);
  } else {
    const format = oneOf(request.format ?? "jsonl", ["jsonl", "avro"], "--format");
    sink = new PartFileSink({ dir: request.output, format });
    stateDir = resolve(request.stateDir ?? request.output);
  }
  source = seams.wrapSource?.(source) ?? source;
  sink = seams.wrapSink?.(sink) ?? sink;

  const m = config.model;
  const model = await ModelRunner.create(await batchModelOptions(config)).catch(async (error: unknown) => {
    await Promise.allSettled([source.close(), sink.close()]);
    throw error;
  });
  const close = async () => {
    await Promise.allSettled([model.close(), source.close(), sink.close()]);
  };
  let job: BatchJob;
  try {
    job = new BatchJob({
      source,
      sink,
      model,
      stateDir,
      shardSize: request.shardSize ?? config.batch.shardSize,
      batchSize: request.batchSize ?? config.batching.maxBatchSize,
      maxInFlightBatches: Math.max(2, resolveWorkerCount(m.workers) * 2),
      mode: request.mode ?? "resume",
      tokenizerHash: model.tokenizerHash,
      // Everything here changes output bytes; the model file and tokenizer are covered by model identity.
      outputConfig: {
        ...modelOutputSettings(config),
        inputFormat,
        idField,
        textField,
        outputFormat: sink.format,
      },
      progress: options.progress,
    });
  } catch (error) {
    await close();
    throw error;
  }
  return { run: () => job.run(), stop: () => job.stop(), close };
}

/**
 * The model settings that change what the model returns for a row (the model and tokenizer files are
 * covered by the model version); part of every batch and backfill manifest's config digest.
 */
export function modelOutputSettings(config: SluiceConfig): Record<string, unknown> {
  const m = config.model;
  return {
    task: m.task,
    pooling: m.pooling,
    normalize: m.normalize,
    maxSequenceTokens: m.maxSequenceTokens,
    textPrefix: m.textPrefix,
    labels: m.labels ?? null,
  };
}

/** The input rows of a batch or backfill run: a file, or a topic range (`kafka:TOPIC`). */
export interface BatchSourceRequest {
  /** FILE.jsonl, FILE.csv or kafka:TOPIC. */
  input: string;
  /** File input format: jsonl or csv. Default: from the file extension. */
  inputFormat?: string;
  /** Default config batch.idField. */
  idField?: string;
  /** Default config batch.textField. */
  textField?: string;
  /** Topic inputs only: range start and (exclusive) end specs (src/batch/offset-spec.ts). */
  from?: string;
  to?: string;
}

/**
 * The source for `--input`, shared by `sluice batch` and `sluice backfill submit`; `inputFormat` is what
 * the manifest records (jsonl, csv, kafka-json, kafka-avro, kafka-avro-registry). Topic inputs decode
 * with `decoder` (src/app/wire-codecs.ts) when given, needed for avro-registry.
 */
export function createBatchSource(
  config: SluiceConfig,
  request: BatchSourceRequest,
  decoder?: RequestDecoder,
): { source: BatchSource; inputFormat: string } {
  const idField = request.idField ?? config.batch.idField;
  const textField = request.textField ?? config.batch.textField;
  const inputTopic = kafkaTopic(request.input, "--input");
  if (inputTopic !== null) {
    const source = new KafkaRangeSource({
      kafka: createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-batch` }),
      topic: inputTopic,
      from: request.from ?? null,
      to: request.to ?? null,
      decoder:
        decoder ??
        new RequestDecoder({
          defaultCodec: config.topics.requestCodec,
          maxMessageBytes: config.delivery.maxMessageBytes,
        }),
    });
    return { source, inputFormat: `kafka-${config.topics.requestCodec}` };
  }
  if (request.from || request.to) {
    throw new SluiceError("CONFIG_INVALID", "--from/--to/--range apply to kafka:TOPIC inputs only");
  }
  const format = oneOf(
    request.inputFormat ?? (/\.csv$/i.test(request.input) ? "csv" : "jsonl"),
    ["jsonl", "csv"],
    "--input-format",
  );
  return { source: new FileSource({ path: request.input, format, idField, textField }), inputFormat: format };
}

/**
 * Same mapping as `sluice serve` (config `model` section → ModelRunner options), with model-fetch lines
 * on stderr; shared by `sluice batch`, `sluice plan --measure` and the batch benchmark.
 */
export function batchModelOptions(config: SluiceConfig): Promise<ModelSettings> {
  return modelRunnerOptionsFromConfig(config, (line) => process.stderr.write(`model: ${line}\n`));
}

/** `kafka:TOPIC` → TOPIC; anything else is a path → null. */
function kafkaTopic(spec: string, flag: "--input" | "--output"): string | null {
  if (!spec.startsWith("kafka:")) return null;
  const topic = spec.slice("kafka:".length);
  if (!topic) throw new SluiceError("CONFIG_INVALID", `${flag} kafka:TOPIC needs a topic name`);
  return topic;
}

/** `value` when it is one of `allowed`, else CONFIG_INVALID naming the flag. */
function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new SluiceError("CONFIG_INVALID", `${flag} must be ${allowed.join(" or ")}, got ${value}`);
}
