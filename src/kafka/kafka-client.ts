import { Kafka, type KafkaConfig, type LogEntry, logLevel } from "kafkajs";
import type { SluiceConfig } from "../config/config-schema.js";
import { fixAbortedTransactionOrder } from "./aborted-transaction-order.js";
import { fixAddPartitionsErrors } from "./add-partitions-errors.js";
import { denialLogTap } from "./kafka-failure.js";
import { type KafkaLogSink, kafkaLogCreator, kafkaLogLevel } from "./kafka-log.js";
import { kafkaSecurityOptions } from "./kafka-security.js";

export interface CreateKafkaOptions {
  /** Overrides `config.clientId` (e.g. to tell processes apart). */
  clientId?: string;
  /** kafkajs retry policy; defaults to kafkajs's own. */
  retry?: KafkaConfig["retry"];
}

/**
 * The single place a kafkajs `Kafka` is built from configuration (kafkajs is in maintenance mode, so
 * keep it behind our own seams). With a logger, kafkajs warnings and errors go to pino with the
 * kafkajs namespace; without one kafkajs stays silent (its default console logger would interleave
 * with the CLI's output).
 */
export function createKafka(
  config: SluiceConfig["kafka"],
  logger?: KafkaLogSink,
  options: CreateKafkaOptions = {},
): Kafka {
  // Every Sluice client may read transactional topics with read_committed; see that module.
  fixAbortedTransactionOrder();
  // A refused topic in a transaction is reported as itself, not as "operation not attempted".
  fixAddPartitionsErrors();
  const failures = denialLogTap();
  const kafkaConfig: KafkaConfig = {
    clientId: options.clientId ?? config.clientId,
    brokers: config.brokers,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    // ERROR at least, even without a sink: the failure classifier reads broker denials from
    // kafkajs's error lines (kafka-failure.ts); the sink gets what the logging policy says (kafka-log.ts).
    logLevel: Math.max(kafkaLogLevel(logger), logLevel.ERROR),
    logCreator: () => {
      const toSink = kafkaLogCreator(logger)();
      return (entry: LogEntry) => {
        failures.tap(entry);
        toSink(entry);
      };
    },
  };
  // TLS and SASL options (files read, secrets resolved) come from their own module.
  Object.assign(kafkaConfig, kafkaSecurityOptions(config));
  if (options.retry) kafkaConfig.retry = options.retry;
  const kafka = new Kafka(kafkaConfig);
  failures.attach(kafka, {
    brokers: config.brokers,
    ssl: config.ssl !== false,
    ...(config.sasl ? { sasl: { mechanism: config.sasl.mechanism, username: config.sasl.username } } : {}),
  });
  return kafka;
}
