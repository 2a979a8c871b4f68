import { Command } from "commander";
import { packageVersion } from "../config/project-paths.js";
import { ignoreKafkajsNegativeTimeoutWarning } from "../kafka/client/kafkajs-timeout-warning.js";
import { isSluiceError } from "../sluice-error.js";
import * as aclsCommand from "./acls-command.js";
import * as backfillCommand from "./backfill-command.js";
import * as batchCommand from "./batch-command.js";
import * as configCommand from "./config-command.js";
import * as demoCommand from "./demo-command.js";
import * as inferCommand from "./infer-command.js";
import * as kafkaCommand from "./kafka-command.js";
import * as modelCommand from "./model-command.js";
import * as planCommand from "./plan-command.js";
import * as registryCommand from "./registry-command.js";
import * as serveCommand from "./serve-command.js";
import * as statusCommand from "./status-command.js";
import * as zipkinCommand from "./zipkin-command.js";

ignoreKafkajsNegativeTimeoutWarning();

/**
 * A command module. `register(program)` declares one command (name, description, options, help) and
 * stays cheap: the command's action imports what it runs (`await import(...)`), so `sluice --help`
 * or `sluice config print` loads no model runtime and no Kafka client (test/e2e/cli-lazy-load.test.ts
 * checks). `prepare(command)` is for help that needs a
 * heavier module (the configuration schema, say): awaited before parsing, only when the command line
 * names the command (`sluice serve --help`, `sluice help serve`, `sluice serve`).
 */
interface CommandModule {
  register(program: Command): void;
  prepare?(command: Command): Promise<void>;
}

/**
 * The `sluice` command. Each command module is listed once below; keep it a plain list (no discovery
 * magic) so the CLI surface is readable in one place. Commands read configuration with
 * `await loadCommandConfig(command)` from ./config-command.js, which honours the global `--config`.
 */
const COMMANDS: CommandModule[] = [
  kafkaCommand,
  configCommand,
  serveCommand,
  demoCommand,
  statusCommand,
  batchCommand,
  backfillCommand,
  planCommand,
  modelCommand,
  inferCommand,
  registryCommand,
  aclsCommand,
  zipkinCommand,
];

/** The program for the command line `args` (the arguments after the script name). */
export async function buildProgram(args: readonly string[] = []): Promise<Command> {
  const program = new Command("sluice")
    .description("Streaming micro-batch ONNX inference on Apache Kafka (online and batch)")
    .version(packageVersion(), "-V, --version")
    .option(
      "-c, --config <path>",
      "YAML configuration file (default: $SLUICE_CONFIG or ./sluice.config.yaml)",
    )
    .showHelpAfterError();
  for (const module of COMMANDS) {
    const before = program.commands.length;
    module.register(program);
    const command = program.commands[before];
    // A word of the command line that only looks like the name (a file called "serve") just
    // prepares one help text too many.
    if (module.prepare && command && args.includes(command.name())) await module.prepare(command);
  }
  return program;
}

/** Prints an error the way users should see it: `CODE: message`, a stack only with SLUICE_DEBUG=1. */
export async function reportError(error: unknown): Promise<void> {
  if (isSluiceError(error)) {
    process.stderr.write(`${error.code}: ${error.message}\n`);
    if (process.env["SLUICE_DEBUG"] && error.cause)
      process.stderr.write(`${String((error.cause as Error).stack ?? error.cause)}\n`);
    return;
  }
  // A kafkajs error that escaped its adapter still gets its class and a fix, not INTERNAL. Loaded
  // here, on the error path only: the Kafka failure rules are no part of a command that succeeds.
  const { kafkaFailure } = await import("../kafka/client/kafka-failure.js");
  const kafka = kafkaFailure(error, { doing: "talking to Kafka" });
  if (kafka) {
    await reportError(kafka);
    return;
  }
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`INTERNAL: ${message}\n`);
  if (process.env["SLUICE_DEBUG"]) process.stderr.write(`${(error as Error)?.stack ?? ""}\n`);
  else process.stderr.write("(set SLUICE_DEBUG=1 for a stack trace)\n");
}

try {
  await (await buildProgram(process.argv.slice(2))).parseAsync(process.argv);
} catch (error) {
  await reportError(error);
  process.exitCode = 1;
  // A failed command exits even if a client it could not close (a refused TLS connection, say)
  // still holds the event loop; an unref'd timer fires only then.
  setTimeout(() => process.exit(1), 5000).unref();
}
