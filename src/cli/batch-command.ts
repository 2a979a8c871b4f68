import { resolve } from "node:path";
import type { Command } from "commander";
import { BatchJob, type BatchRunMode } from "../batch/batch-job.js";
import type { BatchSink } from "../batch/batch-sink.js";
import type { BatchSource } from "../batch/batch-source.js";
import { FileSource } from "../batch/file-source.js";
import { KafkaRangeSource } from "../batch/kafka-range-source.js";
import { KafkaTopicSink } from "../batch/kafka-topic-sink.js";
import { splitRangeSpec } from "../batch/offset-spec.js";
import { PartFileSink } from "../batch/part-file-sink.js";
import type { SluiceConfig } from "../config/config-schema.js";
import { createKafka } from "../kafka/kafka-client.js";
import { ModelRunner, type ModelRunnerOptions } from "../model/model-runner.js";
import { modelRunnerOptionsFromConfig } from "../model/model-runner-config.js";
import { SluiceError } from "../sluice-error.js";
import { BatchProgressBar } from "./batch-progress-bar.js";
import { loadCommandConfig } from "./config-command.js";

interface BatchCliOptions {
  input: string;
  output: string;
  format: string;
  inputFormat?: string;
  idField?: string;
  textField?: string;
  shardSize?: string;
  batchSize?: string;
  from?: string;
  to?: string;
  range?: string;
  stateDir?: string;
  newRun?: boolean;
  retryFailed?: boolean;
  progressIntervalMs: string;
}

/**
 * `sluice batch --input SRC --output DST`: offline scoring in checkpointed shards (docs/batch-mode.md).
 * Test-only hooks (never set them in production): SLUICE_TEST_FAIL_IDS=id1,id2 fails those ids as
 * INFERENCE_FAILED; SLUICE_TEST_SHARD_DELAY_MS=N sleeps before each shard commit;
 * SLUICE_TEST_COMMIT_DELAY_MS=N sleeps inside a topic output's transaction, between send and commit.
 */
export function register(program: Command): void {
  program
    .command("batch")
    .description(
      "Score a file or a topic range in resumable shards; writes part files or a topic, plus manifest.json",
    )
    .requiredOption("-i, --input <src>", "input: FILE.jsonl, FILE.csv or kafka:TOPIC")
    .requiredOption("-o, --output <dst>", "output: a directory for part files, or kafka:TOPIC")
    .option("--format <format>", "part file format: jsonl or avro", "jsonl")
    .option("--input-format <format>", "jsonl or csv (default: from the file extension)")
    .option("--id-field <name>", "input field/column holding the id (default: config batch.idField)")
    .option("--text-field <name>", "input field/column holding the text (default: config batch.textField)")
    .option(
      "--shard-size <rows>",
      "rows per shard, the unit of checkpointing (default: config batch.shardSize)",
    )
    .option("--batch-size <items>", "items per model call (default: config batching.maxBatchSize)")
    .option("--from <spec>", "topic input start: earliest | P:OFFSET[,P:OFFSET] | ISO timestamp (inclusive)")
    .option("--to <spec>", "topic input end: latest | P:OFFSET[,P:OFFSET] | ISO timestamp (exclusive)")
    .option(
      "--range <spec>",
      "topic input offsets P:START-P:END[,...], e.g. 0:100-0:500 (instead of --from/--to)",
    )
    .option(
      "--state-dir <dir>",
      "manifest/failures directory for a topic output (default .sluice/batch/<topic>)",
    )
    .option("--new-run", "discard the run recorded in the output's manifest and start over")
    .option("--retry-failed", "reprocess only the rows in failures.jsonl and merge the recovered ones")
    .option("--progress-interval-ms <ms>", "plain progress line cadence when not on a TTY", "10000")
    .action(async (opts: BatchCliOptions, command: Command) => {
      if (opts.newRun && opts.retryFailed) {
        throw new SluiceError("CONFIG_INVALID", "--new-run and --retry-failed exclude each other: pick one");
      }
      const config = loadCommandConfig(command);
      const summary = await runBatchCommand(opts, config);
      process.exitCode = summary.action === "interrupted" ? 130 : 0;
    });
}

async function runBatchCommand(opts: BatchCliOptions, config: SluiceConfig) {
  const idField = opts.idField ?? config.batch.idField;
  const textField = opts.textField ?? config.batch.textField;
  const shardSize = intOption("--shard-size", opts.shardSize) ?? config.batch.shardSize;
  const batchSize = intOption("--batch-size", opts.batchSize) ?? config.batching.maxBatchSize;
  const mode: BatchRunMode = opts.newRun ? "new-run" : opts.retryFailed ? "retry-failed" : "resume";
  const kafka = () => createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-batch` });

  let source: BatchSource;
  let inputFormat: string;
  if (opts.range !== undefined) {
    if (opts.from !== undefined || opts.to !== undefined) {
      throw new SluiceError("CONFIG_INVALID", "--range replaces --from/--to: give one or the other");
    }
    ({ from: opts.from, to: opts.to } = splitRangeSpec(opts.range));
  }
  if (opts.input.startsWith("kafka:")) {
    const topic = opts.input.slice("kafka:".length);
    if (!topic) throw new SluiceError("CONFIG_INVALID", "--input kafka:TOPIC needs a topic name");
    source = new KafkaRangeSource({
      kafka: kafka(),
      topic,
      from: opts.from ?? null,
      to: opts.to ?? null,
      defaultCodec: config.topics.requestCodec,
    });
    inputFormat = `kafka-${config.topics.requestCodec}`;
  } else {
    if (opts.from || opts.to) {
      throw new SluiceError("CONFIG_INVALID", "--from/--to/--range apply to kafka:TOPIC inputs only");
    }
    const format = opts.inputFormat ?? (/\.csv$/i.test(opts.input) ? "csv" : "jsonl");
    if (format !== "jsonl" && format !== "csv") {
      throw new SluiceError("CONFIG_INVALID", `--input-format must be jsonl or csv, got ${format}`);
    }
    source = new FileSource({ path: opts.input, format, idField, textField });
    inputFormat = format;
  }

  let sink: BatchSink;
  let stateDir: string;
  if (opts.output.startsWith("kafka:")) {
    const topic = opts.output.slice("kafka:".length);
    if (!topic) throw new SluiceError("CONFIG_INVALID", "--output kafka:TOPIC needs a topic name");
    const commitDelay = process.env["SLUICE_TEST_COMMIT_DELAY_MS"];
    sink = new KafkaTopicSink({
      kafka: kafka(),
      topic,
      codec: config.topics.resultCodec,
      ...(commitDelay ? { testCommitDelayMs: Number(commitDelay) } : {}),
    });
    stateDir = resolve(opts.stateDir ?? `.sluice/batch/${topic}`);
  } else {
    if (opts.format !== "jsonl" && opts.format !== "avro") {
      throw new SluiceError("CONFIG_INVALID", `--format must be jsonl or avro, got ${opts.format}`);
    }
    sink = new PartFileSink({ dir: opts.output, format: opts.format });
    stateDir = resolve(opts.stateDir ?? opts.output);
  }

  const m = config.model;
  const model = await ModelRunner.create(await modelOptions(config));
  try {
    const failIds = process.env["SLUICE_TEST_FAIL_IDS"];
    const delay = process.env["SLUICE_TEST_SHARD_DELAY_MS"];
    const job = new BatchJob({
      source,
      sink,
      model,
      stateDir,
      shardSize,
      batchSize,
      maxInFlightBatches: Math.max(2, m.workers * 2),
      mode,
      tokenizerHash: model.tokenizerHash,
      // Everything here changes output bytes; the model file and tokenizer are covered by model identity.
      outputConfig: {
        task: m.task,
        pooling: m.pooling,
        normalize: m.normalize,
        maxSequenceTokens: m.maxSequenceTokens,
        textPrefix: m.textPrefix,
        labels: m.labels ?? null,
        inputFormat,
        idField,
        textField,
        outputFormat: sink.format,
      },
      progress: new BatchProgressBar({
        intervalMs: intOption("--progress-interval-ms", opts.progressIntervalMs),
      }),
      ...(failIds ? { testFailIds: new Set(failIds.split(",").map((s) => s.trim())) } : {}),
      ...(delay ? { testShardDelayMs: Number(delay) } : {}),
    });
    // First Ctrl-C / SIGTERM: finish the shard in progress and stop cleanly; a second one exits at once
    // (still safe: that is a crash, and the next run resumes from the manifest).
    let signalled = false;
    const onSignal = () => {
      if (signalled) process.exit(130);
      signalled = true;
      process.stderr.write("batch: stopping after the shard in progress (signal again to exit now)\n");
      job.stop();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    try {
      return await job.run();
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  } finally {
    await Promise.allSettled([model.close(), source.close(), sink.close()]);
  }
}

/** Same mapping as `sluice serve` (config `model` section → ModelRunner options). */
export function modelOptions(config: SluiceConfig): Promise<ModelRunnerOptions> {
  return modelRunnerOptionsFromConfig(config, (line) => process.stderr.write(`model: ${line}\n`));
}

function intOption(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) {
    throw new SluiceError("CONFIG_INVALID", `${flag} must be a positive integer, got "${value}"`);
  }
  return n;
}
