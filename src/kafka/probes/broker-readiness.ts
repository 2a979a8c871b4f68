// First: kafkajs must find the linear message grouping when it loads (message-grouping.ts).
import "../protocol/message-grouping.js";
import { setTimeout as sleep } from "node:timers/promises";
import { Kafka, logLevel } from "kafkajs";
import type { KafkaSecuritySettings } from "../client/kafka-client.js";
import { fixThrottleCheckDelay } from "../protocol/throttle-check-delay.js";

/**
 * Polls until a kafkajs admin can describe the cluster (a broker and an elected controller), failing
 * fast when `exited` reports that the broker process died. Also used for brokers Sluice did not start.
 */
export async function waitUntilReady(
  bootstrap: string,
  timeoutMs: number,
  exited: () => string | undefined = () => undefined,
  client: KafkaSecuritySettings = {},
): Promise<void> {
  const kafka = probeClient(bootstrap, client, "sluice-local-broker", {
    connectionTimeout: 1000,
    requestTimeout: 5000,
  });
  const deadline = Date.now() + timeoutMs;
  let lastError = "no answer yet";
  while (Date.now() < deadline) {
    const died = exited();
    if (died) throw new Error(`the Kafka process ${died}`);
    const admin = kafka.admin();
    try {
      await admin.connect();
      const cluster = await admin.describeCluster();
      if (cluster.brokers.length > 0 && cluster.controller !== null) return;
      lastError = "cluster has no controller yet";
    } catch (error) {
      lastError = (error as Error).message;
    } finally {
      await admin.disconnect().catch(() => {});
    }
    await sleep(500);
  }
  throw new Error(`timed out after ${timeoutMs} ms (last error: ${lastError})`);
}

/**
 * Makes a fresh broker behave like a lived-in one: creates `__consumer_offsets` and
 * `__transaction_state` and waits until their coordinators answer. Without this the first group or
 * transactional request on a new cluster can fail with NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
 * (seen on Kafka 4.1.1), which kafkajs's admin does not always retry.
 */
export async function warmUpCoordinators(
  bootstrap: string,
  timeoutMs = 30_000,
  client: KafkaSecuritySettings = {},
): Promise<void> {
  const kafka = probeClient(bootstrap, client, "sluice-warm-up", { connectionTimeout: 2000 });
  const deadline = Date.now() + timeoutMs;
  const attempt = async (name: string, step: () => Promise<void>): Promise<void> => {
    let last = "";
    while (Date.now() < deadline) {
      try {
        await step();
        return;
      } catch (error) {
        last = (error as Error).message;
        await sleep(250);
      }
    }
    throw new Error(`${name} did not become ready within ${timeoutMs} ms (last error: ${last})`);
  };
  await attempt("group coordinator", async () => {
    const admin = kafka.admin();
    try {
      await admin.connect();
      // describeCluster loads broker metadata; without it kafkajs cannot look up a coordinator.
      await admin.describeCluster();
      await admin.fetchOffsets({ groupId: "sluice-warm-up" });
    } finally {
      await admin.disconnect().catch(() => {});
    }
  });
  await attempt("transaction coordinator", async () => {
    const producer = kafka.producer({
      transactionalId: "sluice-warm-up",
      idempotent: true,
      maxInFlightRequests: 1,
      // kafkajs refuses an idempotent producer without retries.
      retry: { retries: 3, initialRetryTime: 100 },
    });
    try {
      await producer.connect();
    } finally {
      await producer.disconnect().catch(() => {});
    }
  });
}

/** A silent client that does not retry: the probes retry on their own schedule. */
function probeClient(
  bootstrap: string,
  client: KafkaSecuritySettings,
  clientId: string,
  timeouts: { connectionTimeout: number; requestTimeout?: number },
): Kafka {
  // Not made by createKafka, so the one correction that matters here is applied here: no
  // TimeoutNegativeWarning on Node.js 24 (throttle-check-delay.ts).
  fixThrottleCheckDelay();
  return new Kafka({
    ...client,
    ...timeouts,
    clientId,
    brokers: [bootstrap],
    retry: { retries: 0 },
    logLevel: logLevel.NOTHING,
  });
}
