import { LocalBroker } from "../src/devtools/local-broker.js";

/**
 * The broker a benchmark talks to: KAFKA_BROKERS, or the project's LocalBroker (started here when
 * none runs, and stopped by `stop()`; one already running is left alone).
 */
export async function benchBroker(): Promise<{ brokers: string[]; note: string; stop(): Promise<void> }> {
  const configured = (process.env.KAFKA_BROKERS ?? "").split(",").filter(Boolean);
  if (configured.length > 0)
    return { brokers: configured, note: `KAFKA_BROKERS=${configured.join(",")}`, stop: async () => {} };
  const broker = new LocalBroker({ onProgress: (m) => process.stderr.write(`[broker] ${m}\n`) });
  const status = await broker.start();
  return {
    brokers: [status.bootstrap as string],
    note: `project LocalBroker (Kafka ${status.kafkaVersion ?? "3.9.1"}, ${status.bootstrap}${status.alreadyRunning ? ", already running" : ", started by the benchmark"})`,
    stop: async () => {
      if (!status.alreadyRunning) await broker.stop();
    },
  };
}
