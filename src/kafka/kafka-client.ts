import { Kafka, type KafkaConfig, type LogEntry, logLevel } from "kafkajs";
import type { SluiceConfig } from "../config/config-schema.js";
import { fixAbortedTransactionOrder } from "./aborted-transaction-order.js";
import { fixAddPartitionsErrors } from "./add-partitions-errors.js";
import { denialLogTap } from "./kafka-failure.js";
import { kafkaSecurityOptions } from "./kafka-security.js";

/** The subset of a pino logger this module needs, so callers can pass any pino child. */
export interface KafkaLogSink {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

/**
 * kafkajs logs every error *response* at ERROR in its Connection namespace, then retries it. Those
 * that are transient by the protocol (coordinator moving or loading, leader election) are expected
 * around broker start and rebalances; a real failure still surfaces as an error thrown to our code.
 * They go to debug so an on-call engineer's error stream holds only what needs a human.
 */
const TRANSIENT_RESPONSE_ERROR =
  /coordinator is not available|not the correct coordinator|coordinator is loading|no leader for this topic-partition|leader is not available|rebalance in progress/i;

/** kafkajs's per-attempt connection failures (it retries them; see forward()). */
const CONNECTION_RETRY = /^(Connection error|Connection timeout|Failed to connect to seed broker)/;

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
    // ERROR at least: the failure classifier reads broker denials from kafkajs's error lines.
    logLevel: logger ? logLevel.WARN : logLevel.ERROR,
    logCreator: () => (entry: LogEntry) => {
      failures.tap(entry);
      forward(logger, entry);
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

function forward(logger: KafkaLogSink | undefined, entry: LogEntry): void {
  if (!logger) return;
  // kafkajs puts the message inside `log` next to structured fields (broker, clientId, error, retry
  // counts); keep those, drop its own timestamp/logger name (pino adds its own).
  const { message, timestamp: _timestamp, logger: _logger, ...fields } = entry.log;
  const context: Record<string, unknown> = { component: "kafkajs", namespace: entry.namespace, ...fields };
  if (entry.namespace === "Connection" && TRANSIENT_RESPONSE_ERROR.test(String(fields["error"] ?? ""))) {
    logger.debug?.(context, message);
    return;
  }
  if (CONNECTION_RETRY.test(message)) {
    // A connection attempt kafkajs will retry is no one's problem yet; the final failure is classified
    // and reported once by Sluice (kafka-failure.ts). A warning, without a stack trace per retry.
    const { stack: _stack, ...rest } = context;
    logger.warn(rest, message);
    return;
  }
  if (entry.level === logLevel.ERROR) logger.error(context, message);
  else if (entry.level === logLevel.WARN) logger.warn(context, message);
}
