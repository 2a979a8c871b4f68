// First: kafkajs must find the linear message grouping when it loads (message-grouping.ts).
import "../protocol/message-grouping.js";
import { Kafka, type KafkaConfig, type LogEntry, logLevel } from "kafkajs";
import type { SluiceConfig } from "../../config/config-schema.js";
import { fixAbortedTransactionOrder } from "../protocol/aborted-transaction-order.js";
import { fixAddPartitionsErrors } from "../protocol/add-partitions-errors.js";
import { fixConcurrentTransactionsRetry } from "../protocol/concurrent-transactions.js";
import { fixCoordinatorLookups } from "../protocol/coordinator-cache.js";
import { fixPausedFetchWait } from "../protocol/paused-fetch-wait.js";
import { fixProduceEncoding } from "../protocol/produce-encoding.js";
import { fixThrottleCheckDelay } from "../protocol/throttle-check-delay.js";
import { denialLogTap } from "./kafka-failure.js";
import { type KafkaLogSink, kafkaLogCreator, kafkaLogLevel } from "./kafka-log.js";
import { kafkaSecurityOptions } from "./kafka-security.js";
import { instrumentRequests } from "./request-timing.js";

/**
 * The Kafka client handle the rest of Sluice passes around (made by `createKafka`). Only src/kafka
 * uses what is inside it; elsewhere it is an opaque handle, so kafkajs's types stay behind this room
 * (`.dependency-cruiser.cjs`, kafkajs-stays-in-kafka).
 */
export type KafkaClient = Kafka;

/** A client's TLS and SASL settings as the client library takes them (a broker's admin settings). */
export type KafkaSecuritySettings = Pick<KafkaConfig, "ssl" | "sasl">;

/** Client settings but the bootstrap list (`readFreshness`'s `kafka` option): kafkajs's own shape. */
export type KafkaClientSettings = Omit<KafkaConfig, "brokers">;

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
  const kafkaConfig: KafkaConfig = {
    clientId: options.clientId ?? config.clientId,
    brokers: config.brokers,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
  };
  // TLS and SASL options (files read, secrets resolved) come from their own module.
  Object.assign(kafkaConfig, kafkaSecurityOptions(config));
  if (options.retry) kafkaConfig.retry = options.retry;
  return buildKafka(kafkaConfig, kafkaLogCreator(logger), kafkaLogLevel(logger), {
    brokers: config.brokers,
    ssl: config.ssl !== false,
    ...(config.sasl ? { sasl: { mechanism: config.sasl.mechanism, username: config.sasl.username } } : {}),
  });
}

/**
 * A kafkajs client from kafkajs's own settings, for the library API (`readFreshness`), whose users
 * pass `ssl`/`sasl`/`clientId` as kafkajs takes them: the same fixes and failure classification as
 * `createKafka`. kafkajs stays silent unless the settings bring a `logCreator` (then it gets the
 * entries at the settings' `logLevel`, INFO by default, as kafkajs would).
 */
export function createKafkaFromClientConfig(config: KafkaConfig): Kafka {
  const { logCreator, logLevel: level, ...rest } = config;
  const sasl = config.sasl;
  return buildKafka(
    rest,
    logCreator ?? (() => () => {}),
    logCreator ? (level ?? logLevel.INFO) : logLevel.NOTHING,
    {
      brokers: typeof config.brokers === "function" ? [] : config.brokers,
      ssl: Boolean(config.ssl),
      ...(sasl
        ? { sasl: { mechanism: sasl.mechanism, ...("username" in sasl ? { username: sasl.username } : {}) } }
        : {}),
    },
  );
}

/** What the failure classifier is told about a client (kafka-failure.ts). */
type ClientFacts = Parameters<ReturnType<typeof denialLogTap>["attach"]>[1];

function buildKafka(
  kafkaConfig: KafkaConfig,
  logCreator: NonNullable<KafkaConfig["logCreator"]>,
  level: logLevel,
  facts: ClientFacts,
): Kafka {
  // Every Sluice client may read transactional topics with read_committed; see that module.
  fixAbortedTransactionOrder();
  // A refused topic in a transaction is reported as itself, not as "operation not attempted".
  fixAddPartitionsErrors();
  // Produce requests in one pass with a native CRC-32C (the Kafka path's largest per-record cost).
  fixProduceEncoding();
  // A consumer whose partitions are all paused fetches again as soon as one resumes.
  fixPausedFetchWait();
  // No negative timer delay (Node.js 24 warns of each outside the logs).
  fixThrottleCheckDelay();
  // A transaction started while the previous one completes is retried within milliseconds, not 300 ms.
  fixConcurrentTransactionsRetry();
  // A coordinator is looked up once, not before every transactional request (four per transaction).
  // After the retry above, so a refusal it retries away does not count as a failed request.
  fixCoordinatorLookups();
  const failures = denialLogTap();
  const kafka = new Kafka({
    ...kafkaConfig,
    // ERROR at least, even without a sink: the failure classifier reads broker denials from
    // kafkajs's error lines (kafka-failure.ts); the sink gets what its level says (kafka-log.ts).
    logLevel: Math.max(level, logLevel.ERROR),
    logCreator: () => {
      const toSink = logCreator(level);
      return (entry: LogEntry) => {
        failures.tap(entry);
        if (entry.level <= level) toSink(entry);
      };
    },
  });
  failures.attach(kafka, facts);
  // Its producers, consumers and admins report their requests' durations (observeKafkaRequests).
  instrumentRequests(kafka);
  return kafka;
}
