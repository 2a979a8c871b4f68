import type { Command } from "commander";
import { splitRangeSpec } from "../runs/offset-spec.js";
import { formatRunCost } from "../runs/run-cost.js";
import { SluiceError } from "../sluice-error.js";
import { featureRequest, intOption } from "./batch-command.js";
import { loadCommandConfig } from "./config-command.js";

interface SubmitOptions {
  input: string;
  runId: string;
  inputFormat?: string;
  idField?: string;
  textField?: string;
  features?: string;
  featureInput?: string;
  from?: string;
  to?: string;
  range?: string;
  chunkRows: string;
  model: string;
}

/**
 * `sluice backfill submit|status|export`: backfill runs over Kafka, processed by every `sluice serve`
 * of the group in its backfill lane (docs/lanes.md). Parses, calls src/app/backfill-runtime.ts, prints.
 */
export function register(program: Command): void {
  const backfill = program
    .command("backfill")
    .description("Backfill runs over Kafka: submit rows to topics.backfill, follow them, export results");

  backfill
    .command("submit")
    .description("Write an input's rows to the backfill topic (resumable, idempotent per --run-id)")
    .requiredOption("-i, --input <src>", "input: FILE.jsonl, FILE.csv or kafka:TOPIC")
    .requiredOption("--run-id <id>", "the run's id (letters, digits, . _ -); resubmitting it resumes")
    .option("--input-format <format>", "jsonl or csv (default: from the file extension)")
    .option("--id-field <name>", "input field/column holding the id (default: config batch.idField)")
    .option("--text-field <name>", "input field/column holding the text (default: config batch.textField)")
    .option("--features <columns>", "tensor models: comma-separated feature columns read as one FP32 input")
    .option("--feature-input <name>", "tensor models: the model input --features feed")
    .option("--from <spec>", "topic input start: earliest | P:OFFSET[,P:OFFSET] | ISO timestamp (inclusive)")
    .option("--to <spec>", "topic input end: latest | P:OFFSET[,P:OFFSET] | ISO timestamp (exclusive)")
    .option("--range <spec>", "topic input offsets P:START-P:END[,...] (instead of --from/--to)")
    .option("--chunk-rows <rows>", "input rows per submit transaction", "500")
    .option(
      "--model <role>",
      "serving (the version online answers with) or candidate (the candidate section's model, recorded with its version; docs/model-upgrades.md)",
      "serving",
    )
    .action(async (opts: SubmitOptions, command: Command) => {
      if (opts.model !== "serving" && opts.model !== "candidate") {
        throw new SluiceError(
          "CONFIG_INVALID",
          `--model must be serving or candidate, got ${JSON.stringify(opts.model)}`,
        );
      }
      const config = await loadCommandConfig(command);
      if (opts.range !== undefined && (opts.from !== undefined || opts.to !== undefined)) {
        throw new SluiceError("CONFIG_INVALID", "--range replaces --from/--to: give one or the other");
      }
      const range = opts.range !== undefined ? splitRangeSpec(opts.range) : { from: opts.from, to: opts.to };
      const { submitBackfill } = await import("../app/backfill-runtime.js");
      const summary = await submitBackfill(
        config,
        {
          input: opts.input,
          runId: opts.runId,
          inputFormat: opts.inputFormat,
          idField: opts.idField,
          textField: opts.textField,
          ...featureRequest(opts),
          from: range.from,
          to: range.to,
          chunkRows: intOption("--chunk-rows", opts.chunkRows),
          model: opts.model,
        },
        (m) => process.stderr.write(`backfill: ${m.rowsRead} rows handled (${m.rowsSubmitted} submitted)\n`),
      );
      const m = summary.manifest;
      const what =
        summary.action === "already-submitted"
          ? `run ${summary.runId} is already submitted; nothing to do`
          : `run ${summary.runId} submitted${summary.action === "resumed" ? ` (resumed after row ${summary.rowsSkipped})` : ""}: ${summary.rowsWritten} rows written now`;
      process.stdout.write(
        `${what}. ${m.rowsSubmitted} rows on ${m.topics.backfill}, ${m.rowsInvalid} invalid (see sluice backfill status ${summary.runId})\n`,
      );
    });

  backfill
    .command("status <runId>")
    .description("Progress of a run: per partition, rate, ETA, failures, model versions")
    .option("--json", "print one JSON object")
    .option("--watch", "refresh until the run is done (a progress bar on a terminal)")
    .option("--interval-ms <ms>", "refresh interval with --watch", "2000")
    .action(async (runId: string, opts: { json?: boolean; watch?: boolean; intervalMs: string }, command) => {
      const config = await loadCommandConfig(command as Command);
      const { backfillStatus } = await import("../app/backfill-runtime.js");
      const { BackfillStatusView } = await import("./backfill-status-view.js");
      const view = new BackfillStatusView();
      const interval = intOption("--interval-ms", opts.intervalMs);
      let report = await backfillStatus(config, runId);
      while (opts.watch && !report.done) {
        if (!opts.json) view.progress(report);
        await new Promise((r) => setTimeout(r, interval));
        report = await backfillStatus(config, runId);
      }
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(report)}\n`);
        return;
      }
      view.progress(report);
      view.finish(report);
    });

  backfill
    .command("export <runId>")
    .description("Write a run's results as JSONL part files + manifest.json (resumable; checks completeness)")
    .requiredOption("-o, --output <dir>", "directory for part files and manifest.json")
    .option("--part-rows <rows>", "input rows per part file", "10000")
    .action(async (runId: string, opts: { output: string; partRows: string }, command) => {
      const config = await loadCommandConfig(command as Command);
      const { exportBackfill } = await import("../app/backfill-runtime.js");
      const s = await exportBackfill(config, runId, opts.output, intOption("--part-rows", opts.partRows));
      if (!s.wroteAnything) {
        process.stdout.write(`run ${runId} is already exported to ${s.dir}; nothing new to write\n`);
        return;
      }
      process.stdout.write(
        `export of ${runId} to ${s.dir}: ${s.partsWritten} parts written (${s.rowsWritten} rows), ${s.partsSkipped} already there\n`,
      );
      process.stdout.write(`run ${formatRunCost(s.cost)} over ${s.cost.items} rows the model ran\n`);
      if (s.duplicates > 0) process.stdout.write(`WARNING: ${s.duplicates} ids have more than one result\n`);
      if (!s.complete) {
        process.stdout.write(
          `incomplete: ${s.missing} submitted ids have no result yet${s.missingIds.length ? ` (e.g. ${s.missingIds.slice(0, 5).join(", ")})` : ""}; run the same export again once sluice backfill status ${runId} says done\n`,
        );
        process.exitCode = 2;
      }
    });
}
