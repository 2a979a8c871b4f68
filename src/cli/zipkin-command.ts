import type { Command } from "commander";
import { LocalZipkin, type LocalZipkinOptions, type LocalZipkinStatus } from "../devtools/local-zipkin.js";
import { SluiceError } from "../sluice-error.js";
import { NOT_RUNNING_EXIT_CODE } from "./kafka-command.js";

interface ZipkinCommandOptions {
  home?: string;
  port?: string;
  json?: boolean;
}

function zipkinFrom(opts: ZipkinCommandOptions): LocalZipkin {
  const options: LocalZipkinOptions = {
    onProgress: opts.json ? undefined : (message) => process.stderr.write(`${message}\n`),
  };
  const home = opts.home ?? process.env["SLUICE_ZIPKIN_HOME"];
  if (home) options.runDir = home;
  if (opts.port !== undefined) {
    const port = Number(opts.port);
    if (!Number.isInteger(port))
      throw new SluiceError("CONFIG_INVALID", `--port must be an integer, got "${opts.port}"`);
    options.port = port;
  }
  return new LocalZipkin(options);
}

const summary = (status: LocalZipkinStatus) =>
  `Zipkin ${status.version} at ${status.url} (pid ${status.pid}, run folder ${status.runDir})`;

/** `sluice zipkin start|stop|status`: a local Zipkin to look at Sluice's traces (docs/observability.md, "Tracing"). */
export function register(program: Command): void {
  const zipkin = program
    .command("zipkin")
    .description(
      "Run a local Zipkin to look at traces (in-memory storage, 127.0.0.1 only; needs Java 17+ and Maven)",
    );
  const common = (command: Command) =>
    command
      .option(
        "--home <dir>",
        "run folder for state and logs (default: $SLUICE_ZIPKIN_HOME or .sluice/zipkin)",
      )
      .option("--json", "machine-readable output");

  common(zipkin.command("start"))
    .description("Start Zipkin (or report the one already running) and print how to export spans to it")
    .option("--port <port>", "port on 127.0.0.1; a free one is chosen when taken (default 9411)")
    .action(async (opts: ZipkinCommandOptions) => {
      const status = await zipkinFrom(opts).start();
      if (opts.json) return void process.stdout.write(`${JSON.stringify(status)}\n`);
      process.stdout.write(`${status.alreadyRunning ? "already running" : "started"}: ${summary(status)}\n`);
      process.stdout.write(
        `export spans to it with: export OTEL_TRACES_EXPORTER=zipkin OTEL_EXPORTER_ZIPKIN_ENDPOINT=${status.spansEndpoint}\n`,
      );
      process.stdout.write(`traces: ${status.url}/zipkin/\n`);
    });

  common(zipkin.command("stop"))
    .description("Stop the Zipkin started from this run folder (its spans are in memory: they go with it)")
    .action(async (opts: ZipkinCommandOptions) => {
      const z = zipkinFrom(opts);
      const result = await z.stop();
      if (opts.json) process.stdout.write(`${JSON.stringify({ runDir: z.runDir, ...result })}\n`);
      else if (result.stopped)
        process.stdout.write(`stopped Zipkin (pid ${result.pid}${result.forced ? ", killed" : ""})\n`);
      else process.stdout.write(`no local Zipkin running (run folder ${z.runDir})\n`);
    });

  common(zipkin.command("status"))
    .description(`Show whether Zipkin runs; exits ${NOT_RUNNING_EXIT_CODE} when it does not`)
    .action(async (opts: ZipkinCommandOptions) => {
      const status = await zipkinFrom(opts).status();
      if (opts.json) process.stdout.write(`${JSON.stringify(status)}\n`);
      else if (status.running) process.stdout.write(`running: ${summary(status)}\n`);
      else process.stdout.write(`not running (run folder ${status.runDir})\n`);
      if (!status.running) process.exitCode = NOT_RUNNING_EXIT_CODE;
    });
}
