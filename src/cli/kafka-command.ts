import { join } from "node:path";
import type { Command } from "commander";
import { packageRoot } from "../config/project-paths.js";
import type { LocalBroker, LocalBrokerOptions, LocalBrokerStatus } from "../devtools/local-broker.js";
import { SecureBrokerLayout } from "../devtools/secure-broker.js";
import { SluiceError } from "../sluice-error.js";

interface KafkaCommandOptions {
  home?: string;
  kafkaVersion?: string;
  port?: string;
  heapMb?: string;
  json?: boolean;
  secure?: boolean;
}

/** Exit code of `sluice kafka status` when no broker runs (LSB convention for "not running"). */
export const NOT_RUNNING_EXIT_CODE = 3;

/** The broker's readiness check speaks Kafka, so LocalBroker is loaded only when a command runs. */
async function brokerFrom(
  opts: KafkaCommandOptions,
): Promise<{ broker: LocalBroker; secure?: SecureBrokerLayout }> {
  const { LocalBroker } = await import("../devtools/local-broker.js");
  const options: LocalBrokerOptions = {
    onProgress: opts.json ? undefined : (message) => process.stderr.write(`${message}\n`),
  };
  const home =
    opts.home ??
    (opts.secure ? join(packageRoot(), ".sluice", "secure-kafka") : process.env["SLUICE_KAFKA_HOME"]);
  if (home) options.runDir = home;
  const secure = opts.secure && home ? new SecureBrokerLayout(home) : undefined;
  if (secure) options.listeners = secure;
  const version = opts.kafkaVersion ?? process.env["KAFKA_VERSION"];
  if (version) options.kafkaVersion = version;
  if (opts.port !== undefined) options.port = integer("--port", opts.port);
  if (opts.heapMb !== undefined) options.heapMb = integer("--heap-mb", opts.heapMb);
  return secure ? { broker: new LocalBroker(options), secure } : { broker: new LocalBroker(options) };
}

/** How to point Sluice at the secured broker (printed by `kafka start --secure`; secrets included on purpose). */
function secureUsage(layout: SecureBrokerLayout, bootstrap: string | undefined): string {
  const c = layout.describe();
  if (!c) return "";
  return [
    `CA certificate: ${c.caPath}`,
    `admin (super user): ${c.admin.username} / ${c.admin.password}`,
    `application user (ACLs only, see \`sluice acls\`): ${c.app.username} / ${c.app.password}`,
    `mutual-TLS listener: ${c.mtlsBootstrap} (client certificate ${c.client.certPath}, key ${c.client.keyPath}, principal ${c.client.principal})`,
    "configuration for the application user:",
    "  kafka:",
    `    brokers: ["${bootstrap ?? "?"}"]`,
    `    ssl: { caPath: ${c.caPath} }`,
    `    sasl: { mechanism: scram-sha-512, username: ${c.app.username}, password: ${c.app.password} }`,
    "",
  ].join("\n");
}

function integer(flag: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n))
    throw new SluiceError("CONFIG_INVALID", `${flag} must be an integer, got "${value}"`);
  return n;
}

function describe(status: LocalBrokerStatus): string {
  return `Kafka ${status.kafkaVersion} on ${status.bootstrap} (pid ${status.pid}, run folder ${status.runDir})`;
}

export function register(program: Command): void {
  const kafka = program
    .command("kafka")
    .description("Run a local single-node Apache Kafka broker (needs Java 17+ and Maven; no Docker)");
  const withCommon = (command: Command) =>
    command
      .option(
        "--home <dir>",
        "run folder for state, logs and data (default: $SLUICE_KAFKA_HOME or .sluice/kafka)",
      )
      .option("--json", "machine-readable output")
      .option(
        "--secure",
        "the secured broker: SASL_SSL (SCRAM-SHA-512), a self-signed CA, ACLs enforced (default run folder .sluice/secure-kafka)",
      );

  withCommon(kafka.command("start"))
    .description("Start the broker (or report the one already running) and print its bootstrap address")
    .option(
      "--kafka-version <version>",
      "Apache Kafka version (default: $KAFKA_VERSION or 3.9.1; 4.1.1 also works)",
    )
    .option("--port <port>", "client port on 127.0.0.1; a free one is chosen when taken (default 19092)")
    .option("--heap-mb <mb>", "max JVM heap in MiB (default 1024)")
    .action(async (opts: KafkaCommandOptions) => {
      const { broker, secure } = await brokerFrom(opts);
      const status = await broker.start();
      if (opts.json) {
        const credentials = secure?.describe();
        process.stdout.write(
          `${JSON.stringify(credentials ? { ...status, secure: credentials } : status)}\n`,
        );
        return;
      }
      process.stdout.write(`${status.alreadyRunning ? "already running" : "started"}: ${describe(status)}\n`);
      if (secure) {
        process.stdout.write(secureUsage(secure, status.bootstrap));
        return;
      }
      if (status.bootstrap !== "127.0.0.1:19092") {
        process.stdout.write(`point Sluice at it with: export KAFKA_BROKERS=${status.bootstrap}\n`);
      }
      process.stdout.write(`${status.bootstrap}\n`);
    });

  withCommon(kafka.command("stop"))
    .description("Stop the broker started from this run folder (SIGTERM, then SIGKILL after 30 s)")
    .action(async (opts: KafkaCommandOptions) => {
      const { broker } = await brokerFrom(opts);
      const result = await broker.stop();
      if (opts.json) process.stdout.write(`${JSON.stringify({ runDir: broker.runDir, ...result })}\n`);
      else if (result.stopped)
        process.stdout.write(`stopped Kafka (pid ${result.pid}${result.forced ? ", killed" : ""})\n`);
      else process.stdout.write(`no local Kafka broker running (run folder ${broker.runDir})\n`);
    });

  withCommon(kafka.command("status"))
    .description(`Show whether the broker runs; exits ${NOT_RUNNING_EXIT_CODE} when it does not`)
    .action(async (opts: KafkaCommandOptions) => {
      const status = await (await brokerFrom(opts)).broker.status();
      if (opts.json) process.stdout.write(`${JSON.stringify(status)}\n`);
      else if (status.running) process.stdout.write(`running: ${describe(status)}\n`);
      else process.stdout.write(`not running (run folder ${status.runDir})\n`);
      if (!status.running) process.exitCode = NOT_RUNNING_EXIT_CODE;
    });
}
