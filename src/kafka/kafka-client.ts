import { Kafka, type KafkaConfig, type SASLOptions } from "kafkajs";
import type { SluiceConfig } from "../config/config-schema.js";
import { fixAbortedTransactionOrder } from "./aborted-transaction-order.js";
import { type KafkaLogSink, kafkaLogCreator, kafkaLogLevel } from "./kafka-log.js";

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
  const kafkaConfig: KafkaConfig = {
    clientId: options.clientId ?? config.clientId,
    brokers: config.brokers,
    ssl: config.ssl,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    logLevel: kafkaLogLevel(logger),
    logCreator: kafkaLogCreator(logger),
  };
  if (config.sasl) kafkaConfig.sasl = saslOptions(config.sasl);
  if (options.retry) kafkaConfig.retry = options.retry;
  return new Kafka(kafkaConfig);
}

function saslOptions(sasl: NonNullable<SluiceConfig["kafka"]["sasl"]>): SASLOptions {
  const { username, password } = sasl;
  switch (sasl.mechanism) {
    case "plain":
      return { mechanism: "plain", username, password };
    case "scram-sha-256":
      return { mechanism: "scram-sha-256", username, password };
    case "scram-sha-512":
      return { mechanism: "scram-sha-512", username, password };
  }
}
