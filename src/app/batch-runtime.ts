import { resolve } from "node:path";
import { BatchJob, type BatchRunMode } from "../batch/batch-job.js";
import type { BatchProgressSink } from "../batch/batch-progress-sink.js";
import type { BatchRunSummary } from "../batch/batch-run-summary.js";
import type { BatchSink } from "../batch/batch-sink.js";
import { PartFileSink } from "../batch/part-file-sink.js";
import { maxBatchSize, type SluiceConfig } from "../config/config-schema.js";
import type { ModelSettings } from "../config/model-settings.js";
import { createKafka } from "../kafka/client/kafka-client.js";
import { KafkaTopicSink } from "../kafka/write/kafka-topic-sink.js";
import { loadModel } from "../model/model-loader.js";
import { modelRunnerOptionsFromConfig } from "../model/model-runner-config.js";
import { resolveWorkerCount } from "../model/worker-count.js";
import { type BatchSeams, installedBatchSeams } from "./batch-seams.js";
import { modelOutputSettings } from "./model-output-settings.js";
import { type BatchSourceRequest, createBatchSource, kafkaTopic, oneOf } from "./run-source.js";
import { createWireCodecs, type WireCodecs } from "./wire-codecs.js";

/**
 * One offline run as `sluice batch` asks for it. Optional fields left unset come from the configuration
 * (the one home of their defaults); the required ones are the CLI's (its flags hold their defaults).
 */
export interface BatchRunRequest extends BatchSourceRequest {
  /** A directory for part files, or kafka:TOPIC. */
  output: string;
  /** Part file format: jsonl or avro (`--format`). */
  format: string;
  /** Rows per shard. Default config batch.shardSize. */
  shardSize?: number;
  /** Items per model call. Default config batching.maxBatchSize. */
  batchSize?: number;
  /** Manifest/failures directory. Default: the output directory, or .sluice/batch/<topic> for a topic output. */
  stateDir?: string;
  /** resume, new-run or retry-failed (from `--new-run` / `--retry-failed`). */
  mode: BatchRunMode;
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
  const kafka = () => createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-batch` });

  const inputTopic = kafkaTopic(request.input, "--input");
  const outputTopic = kafkaTopic(request.output, "--output");
  // Topic inputs and outputs use the same wire codecs as `sluice serve` (schema registry included).
  const wire: WireCodecs | undefined =
    inputTopic !== null || outputTopic !== null ? await createWireCodecs(config) : undefined;
  let { source, inputSettings } = createBatchSource(config, request, wire?.requestDecoder);

  let sink: BatchSink;
  let stateDir: string;
  if (outputTopic !== null) {
    sink = new KafkaTopicSink({
      kafka: kafka(),
      topic: outputTopic,
      codec: config.topics.resultCodec,
      encoder: await (wire as WireCodecs).resultEncoder(outputTopic),
      transactionTimeoutMs: config.delivery.transactionTimeoutMs,
      maxTransactionBytes: config.delivery.maxTransactionBytes,
      beforeCommit: seams.beforeTopicCommit,
    });
    stateDir = resolve(request.stateDir ?? `.sluice/batch/${outputTopic}`);
  } else {
    const format = oneOf(request.format, ["jsonl", "avro"], "--format");
    sink = new PartFileSink({ dir: request.output, format });
    stateDir = resolve(request.stateDir ?? request.output);
  }
  source = seams.wrapSource?.(source) ?? source;
  sink = seams.wrapSink?.(sink) ?? sink;

  const m = config.model;
  const model = await loadModel(await batchModelOptions(config)).catch(async (error: unknown) => {
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
      batchSize: request.batchSize ?? maxBatchSize(config.batching, config.model.task),
      // At least batching.maxInFlightBatches, and two calls per worker so every worker stays busy while
      // the next batch is handed over.
      maxInFlightBatches: Math.max(config.batching.maxInFlightBatches, resolveWorkerCount(m.workers) * 2),
      // Always on: less padding, same output order (docs/batch-mode.md); no flag or key turns it off.
      sortByLength: true,
      mode: request.mode,
      // Everything here changes output bytes; the model file and tokenizer are covered by model identity.
      outputConfig: { ...modelOutputSettings(config), ...inputSettings, outputFormat: sink.format },
      progress: options.progress,
      prices: config.cost,
      // The process exists for this run: its start-up and model load are part of what it cost.
      processCpuBaselineMs: 0,
    });
  } catch (error) {
    await close();
    throw error;
  }
  return { run: () => job.run(), stop: () => job.stop(), close };
}

/**
 * Same mapping as `sluice serve` (config `model` section → TextModelRunner options), with model-fetch lines
 * on stderr; shared by `sluice batch`, `sluice plan --measure` and the batch benchmark.
 */
export function batchModelOptions(config: SluiceConfig): Promise<ModelSettings> {
  return modelRunnerOptionsFromConfig(config, (line) => process.stderr.write(`model: ${line}\n`));
}
