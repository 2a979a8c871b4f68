// First: kafkajs must find the linear message grouping when it loads (message-grouping.ts).
import "../protocol/message-grouping.js";
import { type LogEntry, logLevel } from "kafkajs";

/**
 * kafkajs's log lines mapped onto Sluice's logging policy (docs/observability.md, "Logging policy").
 *
 * kafkajs logs at ERROR what it is about to retry or recover from: every error *response* in its
 * Connection namespace, a rebalance, a member the coordinator forgot, a fenced producer epoch, a
 * topic another instance created first. On a healthy cluster these happen on every deploy, restart
 * and rebalance; Sluice handles each of them (rejoin, retry, recreate the producer, reclaim the
 * partition) and logs its own summary line when one changes what the instance does (`partition
 * reset`, `partition restored`). ERROR is kept for what a person has to act on, so the expected ones
 * go to debug. A failure that does not go away still surfaces: kafkajs gives up and throws, and
 * Sluice reports that error itself.
 */

/** The subset of a pino logger this module needs, so callers can pass any pino child. */
export interface KafkaLogSink {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
  /** pino's level check; with debug enabled kafkajs's INFO lines (joins, assignments) are forwarded too. */
  isLevelEnabled?(level: string): boolean;
}

/**
 * Transient conditions by the Kafka protocol or by Sluice's design, matched on kafkajs's message or on
 * the `error` field it attaches (its texts for the protocol error codes, `kafkajs/src/protocol/error.js`).
 */
const EXPECTED_TRANSIENT: readonly { name: string; pattern: RegExp }[] = [
  // Coordinator moving or loading, leader election: retried by kafkajs.
  {
    name: "coordinator or leader moving",
    pattern:
      /coordinator is not available|not the correct coordinator|coordinator is loading|no leader for this topic-partition|leader is not available|not the leader for that topic-partition|leader epoch in the request is/i,
  },
  // REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED: the consumer rejoins.
  {
    name: "group rebalance",
    pattern:
      /rebalance in progress|group is rebalancing|generation id is not valid|not aware of this member|needs to have a valid member id/i,
  },
  // CONCURRENT_TRANSACTIONS: the previous owner's transaction is still completing; kafkajs retries.
  { name: "concurrent transaction", pattern: /another concurrent operation on the same transaction/i },
  // INVALID_PRODUCER_EPOCH / PRODUCER_FENCED: a newer owner of the partition fenced this producer;
  // Sluice drops the in-flight work and logs `partition reset` (the summary line).
  {
    name: "producer fenced",
    pattern: /operation with an old epoch|newer producer with the same transactionalId/i,
  },
  // Two instances creating the same topics at start-up; ensureTopics treats "already exists" as done.
  { name: "topic creation race", pattern: /topic creation errors|topic with this name already exists/i },
  // Right after a topic is created its partitions take a moment to get leaders.
  { name: "topic not ready", pattern: /does not host this topic-partition/i },
  // The consumer restarting itself after one of the above (its crash handler retries).
  { name: "consumer restart", pattern: /^Restarting the consumer in \d+ms/ },
];

/** kafkajs's per-attempt connection failures (it retries them). */
const CONNECTION_RETRY = /^(Connection error|Connection timeout|Failed to connect to seed broker)/;

/** Which expected transient condition a kafkajs line describes, or undefined for any other line. */
export function expectedTransient(message: string, fields: Record<string, unknown>): string | undefined {
  const text = `${message}\n${String(fields["error"] ?? "")}`;
  return EXPECTED_TRANSIENT.find((t) => t.pattern.test(text))?.name;
}

/** The kafkajs log level to configure: nothing without a sink, INFO when the sink logs debug, else WARN. */
export function kafkaLogLevel(sink: KafkaLogSink | undefined): logLevel {
  if (!sink) return logLevel.NOTHING;
  return sink.isLevelEnabled?.("debug") ? logLevel.INFO : logLevel.WARN;
}

/**
 * A kafkajs `logCreator` writing to `sink`. The sink names the component (serve passes
 * `logger.child({ component: "kafkajs" })`), so lines carry `component` once; each line keeps kafkajs's
 * namespace and structured fields (broker, groupId, error, retry counts).
 */
export function kafkaLogCreator(sink: KafkaLogSink | undefined): () => (entry: LogEntry) => void {
  return () => (entry: LogEntry) => {
    if (!sink) return;
    // kafkajs puts the message inside `log` next to its fields; drop its own timestamp and logger
    // name (pino adds time). Stacks (kafkajs internals) only go to debug lines.
    const { message, timestamp: _timestamp, logger: _logger, stack, ...fields } = entry.log;
    const context: Record<string, unknown> = { namespace: entry.namespace, ...fields };
    const debug = (extra: Record<string, unknown>) =>
      sink.debug?.({ ...context, ...extra, ...(stack === undefined ? {} : { stack }) }, message);
    if (entry.level === logLevel.ERROR || entry.level === logLevel.WARN) {
      const transient = expectedTransient(message, fields);
      if (transient !== undefined) debug({ transient });
      // A connection attempt kafkajs will retry is no one's problem yet; the final failure is
      // classified and reported once by Sluice (kafka-failure.ts): a warning, no stack per retry.
      else if (CONNECTION_RETRY.test(message)) sink.warn(context, message);
      else if (entry.level === logLevel.ERROR) sink.error(context, message);
      else sink.warn(context, message);
      return;
    }
    // INFO (only requested at debug) and DEBUG lines: kafkajs's own narrative, for debugging.
    debug({});
  };
}
