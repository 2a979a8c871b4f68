import type { Admin, Kafka } from "kafkajs";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "./kafka-failure.js";

/**
 * Runs `fn` with a connected admin client. Security and connectivity failures are classified
 * (src/kafka/client/kafka-failure.ts); `access` names what `fn` needs, for an authorization failure's message.
 */
export async function withAdmin<T>(
  kafka: Kafka,
  fn: (admin: Admin) => Promise<T>,
  access: readonly KafkaAccess[] = [],
): Promise<T> {
  const admin = kafka.admin();
  try {
    await admin.connect();
  } catch (cause) {
    // A failed connect may leave kafkajs retrying sockets behind: give them back.
    await admin.disconnect().catch(() => {});
    throw (
      kafkaFailure(cause, { doing: "connecting the admin client", kafka, access }) ??
      new SluiceError(
        "BROKER_UNAVAILABLE",
        `cannot reach Kafka (${(cause as Error).message}); check kafka.brokers in the config or KAFKA_BROKERS`,
        { cause, retriable: true },
      )
    );
  }
  try {
    return await fn(admin);
  } catch (error) {
    throw kafkaFailure(error, { doing: "an admin request", kafka, access }) ?? error;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}
