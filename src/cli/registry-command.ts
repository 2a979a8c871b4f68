import type { Command } from "commander";
import {
  LocalRegistry,
  type LocalRegistryOptions,
  type LocalRegistryStatus,
} from "../devtools/local-registry.js";
import { SluiceError } from "../sluice-error.js";
import { NOT_RUNNING_EXIT_CODE } from "./kafka-command.js";

interface RegistryCommandOptions {
  home?: string;
  port?: string;
  json?: boolean;
}

function registryFrom(opts: RegistryCommandOptions): LocalRegistry {
  const options: LocalRegistryOptions = {
    onProgress: opts.json ? undefined : (message) => process.stderr.write(`${message}\n`),
  };
  const home = opts.home ?? process.env["SLUICE_REGISTRY_HOME"];
  if (home) options.runDir = home;
  if (opts.port !== undefined) {
    const port = Number(opts.port);
    if (!Number.isInteger(port))
      throw new SluiceError("CONFIG_INVALID", `--port must be an integer, got "${opts.port}"`);
    options.port = port;
  }
  return new LocalRegistry(options);
}

function describe(status: LocalRegistryStatus): string {
  return `Apicurio Registry ${status.version} at ${status.url} (pid ${status.pid}, run folder ${status.runDir})`;
}

export function register(program: Command): void {
  const registry = program
    .command("registry")
    .description(
      "Run a local Apicurio schema registry (Confluent-compatible API; needs Java 17+ and Maven; data kept in the run folder)",
    );
  const withCommon = (command: Command) =>
    command
      .option(
        "--home <dir>",
        "run folder for state and logs (default: $SLUICE_REGISTRY_HOME or .sluice/registry)",
      )
      .option("--json", "machine-readable output");

  withCommon(registry.command("start"))
    .description("Start the registry (or report the one already running) and print its schemaRegistry.url")
    .option("--port <port>", "port on 127.0.0.1; a free one is chosen when taken (default 18081)")
    .action(async (opts: RegistryCommandOptions) => {
      const status = await registryFrom(opts).start();
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(status)}\n`);
        return;
      }
      process.stdout.write(`${status.alreadyRunning ? "already running" : "started"}: ${describe(status)}\n`);
      process.stdout.write(`point Sluice at it with: export SLUICE_SCHEMA_REGISTRY__URL=${status.url}\n`);
      process.stdout.write(`${status.url}\n`);
    });

  withCommon(registry.command("stop"))
    .description("Stop the registry started from this run folder (its schemas stay in the run folder)")
    .action(async (opts: RegistryCommandOptions) => {
      const r = registryFrom(opts);
      const result = await r.stop();
      if (opts.json) process.stdout.write(`${JSON.stringify({ runDir: r.runDir, ...result })}\n`);
      else if (result.stopped)
        process.stdout.write(`stopped the registry (pid ${result.pid}${result.forced ? ", killed" : ""})\n`);
      else process.stdout.write(`no local registry running (run folder ${r.runDir})\n`);
    });

  withCommon(registry.command("status"))
    .description(`Show whether the registry runs; exits ${NOT_RUNNING_EXIT_CODE} when it does not`)
    .action(async (opts: RegistryCommandOptions) => {
      const status = await registryFrom(opts).status();
      if (opts.json) process.stdout.write(`${JSON.stringify(status)}\n`);
      else if (status.running) process.stdout.write(`running: ${describe(status)}\n`);
      else process.stdout.write(`not running (run folder ${status.runDir})\n`);
      if (!status.running) process.exitCode = NOT_RUNNING_EXIT_CODE;
    });
}
