import type { Admin, Kafka } from "kafkajs";
import { SluiceError } from "../sluice-error.js";

/** Runs `fn` with a connected admin client; an unreachable cluster becomes BROKER_UNAVAILABLE. */
export async function withAdmin<T>(kafka: Kafka, fn: (admin: Admin) => Promise<T>): Promise<T> {
  const admin = kafka.admin();
  try {
    await admin.connect();
  } catch (cause) {
    throw new SluiceError(
      "BROKER_UNAVAILABLE",
      `cannot reach Kafka (${(cause as Error).message}); check kafka.brokers in the config or KAFKA_BROKERS`,
      { cause, retriable: true },
    );
  }
  try {
    return await fn(admin);
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
