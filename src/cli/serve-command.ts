import type { Command } from "commander";
import { loadCommandConfig } from "./config-command.js";

/** Longest a runtime that failed (e.g. Kafka refused access) takes to stop before serve exits, ms. */
const FATAL_CLOSE_MS = 15_000;

/**
 * `sluice serve`: run the streaming processor until SIGTERM/SIGINT, then stop fetching, finish and
 * commit in-flight batches, leave the group and exit 0. A second signal exits at once (status 130).
 */
/** The keys most runs set, with their environment variables (named by the one rule in env-overrides). */
const COMMON_KEYS: [key: string, note: string][] = [
  ["kafka.brokers", "host:port,...; plain KAFKA_BROKERS too"],
  ["topics.requests", "comma-separated"],
  ["topics.results", ""],
  ["consumer.groupId", ""],
  ["model.path", "unset: the default model, fetched once with Maven"],
  ["observability.metricsPort", "/metrics, /healthz, /readyz; / is the live page"],
];

function serveHelp(envNameFor: (key: string) => string): string {
  return [
    "",
    "Configuration: a YAML file (--config, $SLUICE_CONFIG or ./sluice.config.yaml), overridden by",
    "environment variables SLUICE_<SECTION>__<KEY>. The keys most runs set:",
    ...COMMON_KEYS.map(([key, note]) => `  ${key.padEnd(27)}${envNameFor(key)}${note ? `  (${note})` : ""}`),
    "Every key, its default and its variable: docs/configuration.md. The effective values: sluice config print.",
    "Stops on SIGTERM or Ctrl-C after finishing and committing in-flight batches.\n",
  ].join("\n");
}

/** The help's variable names come from env-overrides, which loads the configuration schema. */
export async function prepare(serve: Command): Promise<void> {
  const { envNameFor } = await import("../config/env-overrides.js");
  serve.addHelpText("after", serveHelp(envNameFor));
}

export function register(program: Command): void {
  program
    .command("serve")
    .description("Consume requests, run micro-batched inference, publish results exactly once")
    // serve has no flags of its own: it reads the configuration (file, then SLUICE_* variables).
    .configureHelp({ showGlobalOptions: true })
    .action(async (_opts: unknown, command: Command) => {
      const config = await loadCommandConfig(command);
      const { createLogger } = await import("../observability/logger.js");
      const { startServeRuntime } = await import("../app/serve-runtime.js");
      const logger = createLogger({
        level: config.observability.logLevel,
        logPayloads: config.observability.logPayloads,
        redactPaths: config.observability.redactPaths,
        base: { instanceId: config.observability.instanceId },
      });
      const runtime = await startServeRuntime(config, logger);
      const livePage = config.observability.ui ? { livePage: `${runtime.metricsUrl}/` } : {};
      logger.info(
        { metricsUrl: runtime.metricsUrl, ...livePage },
        "sluice serve running; SIGTERM or Ctrl-C to stop",
      );
      await new Promise<void>((resolve, reject) => {
        let signalled = false;
        const onSignal = (signal: NodeJS.Signals) => {
          if (signalled) process.exit(130);
          signalled = true;
          logger.info({ signal }, "stopping: finishing in-flight batches");
          // The runtime keeps to shutdown.timeoutMs; this only catches a stop that hangs past it.
          const overrun = config.shutdown.timeoutMs + 2000;
          setTimeout(() => {
            logger.error(
              { timeoutMs: config.shutdown.timeoutMs },
              "shutdown overran shutdown.timeoutMs; exiting, uncommitted work is left to the next owner",
            );
            process.exit(1);
          }, overrun).unref();
          runtime.close().then(resolve, reject);
        };
        process.on("SIGTERM", onSignal);
        process.on("SIGINT", onSignal);
        void runtime.fatal.then((error) => {
          // Bounded: a failed runtime exits within FATAL_CLOSE_MS even if a part does not stop.
          const timer = new Promise<void>((done) => setTimeout(done, FATAL_CLOSE_MS).unref());
          void Promise.race([runtime.close().catch(() => undefined), timer]).finally(() => reject(error));
        });
      });
      logger.info({}, "sluice serve stopped");
    });
}
