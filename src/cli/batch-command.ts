import type { Command } from "commander";
import type { BatchRunRequest } from "../app/batch-runtime.js";
import type { BatchRunMode } from "../batch/batch-job.js";
import type { BatchRunSummary } from "../batch/batch-run-summary.js";
import type { SluiceConfig } from "../config/config-schema.js";
import { splitRangeSpec } from "../runs/offset-spec.js";
import { SluiceError } from "../sluice-error.js";
import { loadCommandConfig } from "./config-command.js";

interface BatchCliOptions {
  input: string;
  output: string;
  format: string;
  inputFormat?: string;
  idField?: string;
  textField?: string;
  features?: string;
  featureInput?: string;
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
 * Parses the flags, hands them to the batch composition root (src/app/batch-runtime.ts) and prints.
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
    .option("--features <columns>", "tensor models: comma-separated feature columns read as one FP32 input")
    .option("--feature-input <name>", "tensor models: the model input --features feed")
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
      const config = await loadCommandConfig(command);
      const summary = await runBatchCommand(opts, config);
      process.exitCode = summary.action === "interrupted" ? 130 : 0;
    });
}

async function runBatchCommand(opts: BatchCliOptions, config: SluiceConfig): Promise<BatchRunSummary> {
  if (opts.range !== undefined && (opts.from !== undefined || opts.to !== undefined)) {
    throw new SluiceError("CONFIG_INVALID", "--range replaces --from/--to: give one or the other");
  }
  const range = opts.range !== undefined ? splitRangeSpec(opts.range) : { from: opts.from, to: opts.to };
  const mode: BatchRunMode = opts.newRun ? "new-run" : opts.retryFailed ? "retry-failed" : "resume";
  const request: BatchRunRequest = {
    input: opts.input,
    output: opts.output,
    format: opts.format,
    inputFormat: opts.inputFormat,
    idField: opts.idField,
    textField: opts.textField,
    ...featureRequest(opts),
    shardSize: optionalIntOption("--shard-size", opts.shardSize),
    batchSize: optionalIntOption("--batch-size", opts.batchSize),
    from: range.from,
    to: range.to,
    stateDir: opts.stateDir,
    mode,
  };
  const { BatchProgressBar } = await import("./batch-progress-bar.js");
  const { createBatchRuntime } = await import("../app/batch-runtime.js");
  const progress = new BatchProgressBar({
    intervalMs: intOption("--progress-interval-ms", opts.progressIntervalMs),
  });

  const runtime = await createBatchRuntime(config, request, { progress });
  // First Ctrl-C / SIGTERM: finish the shard in progress and stop cleanly; a second one exits at once
  // (still safe: that is a crash, and the next run resumes from the manifest).
  let signalled = false;
  const onSignal = () => {
    if (signalled) process.exit(130);
    signalled = true;
    process.stderr.write("batch: stopping after the shard in progress (signal again to exit now)\n");
    runtime.stop();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await runtime.run();
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await runtime.close();
  }
}

/** A positive integer flag whose default is the configuration's: undefined when not given. */
export function optionalIntOption(flag: string, value: string | undefined): number | undefined {
  return value === undefined ? undefined : intOption(flag, value);
}

/** A positive integer flag (commander supplies its default); CONFIG_INVALID naming the flag otherwise. */
export function intOption(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) {
    throw new SluiceError("CONFIG_INVALID", `${flag} must be a positive integer, got "${value}"`);
  }
  return n;
}

/** `--features a,b,c` and `--feature-input NAME` as a source request's fields (batch and backfill submit). */
export function featureRequest(opts: { features?: string; featureInput?: string }): {
  features?: string[];
  featureInput?: string;
} {
  return {
    ...(opts.features ? { features: opts.features.split(",").map((c) => c.trim()) } : {}),
    ...(opts.featureInput ? { featureInput: opts.featureInput } : {}),
  };
}
