import type { Command } from "commander";
import { startServeRuntime } from "../app/serve-runtime.js";
import { createLogger } from "../observability/logger.js";
import { loadCommandConfig } from "./config-command.js";

/** Longest a runtime that failed (e.g. Kafka refused access) takes to stop before serve exits, ms. */
const FATAL_CLOSE_MS = 15_000;

/**
 * `sluice serve`: run the streaming processor until SIGTERM/SIGINT, then stop fetching, finish and
 * commit in-flight batches, leave the group and exit 0. A second signal exits at once (status 130).
 */
export function register(program: Command): void {
  program
    .command("serve")
    .description("Consume requests, run micro-batched inference, publish results exactly once")
    .action(async (_opts: unknown, command: Command) => {
      const config = loadCommandConfig(command);
      const logger = createLogger({
        level: config.observability.logLevel,
        logPayloads: config.observability.logPayloads,
        redactPaths: config.observability.redactPaths,
        base: { instanceId: config.observability.instanceId },
      });
      const runtime = await startServeRuntime(config, logger);
      logger.info({ metricsUrl: runtime.metricsUrl }, "sluice serve running; SIGTERM or Ctrl-C to stop");
      await new Promise<void>((resolve, reject) => {
        let signalled = false;
        const onSignal = (signal: NodeJS.Signals) => {
          if (signalled) process.exit(130);
          signalled = true;
          logger.info({ signal }, "stopping: finishing in-flight batches");
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
