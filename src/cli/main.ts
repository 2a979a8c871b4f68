import { Command } from "commander";
import { packageVersion } from "../config/project-paths.js";
import { kafkaFailure } from "../kafka/client/kafka-failure.js";
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
 * The `sluice` command. Each command module exports `register(program: Command): void` and is listed
 * once below; keep it a plain list (no discovery magic) so the CLI surface is readable in one place.
 * Commands read configuration with `loadCommandConfig(command)` from ./config-command.js, which
 * honours the global `--config` option.
 */
const COMMANDS: { register(program: Command): void }[] = [
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

export function buildProgram(): Command {
  const program = new Command("sluice")
    .description("Streaming micro-batch ONNX inference on Apache Kafka (online and batch)")
    .version(packageVersion(), "-V, --version")
    .option(
      "-c, --config <path>",
      "YAML configuration file (default: $SLUICE_CONFIG or ./sluice.config.yaml)",
    )
    .showHelpAfterError();
  for (const command of COMMANDS) command.register(program);
  return program;
}

/** Prints an error the way users should see it: `CODE: message`, a stack only with SLUICE_DEBUG=1. */
export function reportError(error: unknown): void {
  if (isSluiceError(error)) {
    process.stderr.write(`${error.code}: ${error.message}\n`);
    if (process.env["SLUICE_DEBUG"] && error.cause)
      process.stderr.write(`${String((error.cause as Error).stack ?? error.cause)}\n`);
    return;
  }
  // A kafkajs error that escaped its adapter still gets its class and a fix, not INTERNAL.
  const kafka = kafkaFailure(error, { doing: "talking to Kafka" });
  if (kafka) {
    reportError(kafka);
    return;
  }
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`INTERNAL: ${message}\n`);
  if (process.env["SLUICE_DEBUG"]) process.stderr.write(`${(error as Error)?.stack ?? ""}\n`);
  else process.stderr.write("(set SLUICE_DEBUG=1 for a stack trace)\n");
}

try {
  await buildProgram().parseAsync(process.argv);
} catch (error) {
  reportError(error);
  process.exitCode = 1;
  // A failed command exits even if a client it could not close (a refused TLS connection, say)
  // still holds the event loop; an unref'd timer fires only then.
  setTimeout(() => process.exit(1), 5000).unref();
}
