import {
  DEFAULT_FRESHNESS_TOPIC,
  decodeHeartbeat,
  type FreshnessHeartbeat,
} from "../contracts/freshness-heartbeat.js";
import type { KafkaClientSettings } from "../kafka/client/kafka-client.js";
import { createKafkaFromClientConfig } from "../kafka/client/kafka-client.js";
import { type KafkaAccess, kafkaFailure } from "../kafka/client/kafka-failure.js";
import { readBounded } from "../kafka/read/bounded-reader.js";
import { SluiceError } from "../sluice-error.js";

export type { FreshnessHeartbeat } from "../contracts/freshness-heartbeat.js";

/** The freshness topic when none is named (Sluice config `topics.freshness` has the same default). */
/** Heartbeats emitted this long before now are read when `lookbackMs` is not given, ms. */
const LOOKBACK_MS = 300_000;
/** How long a read may take when `timeoutMs` is not given, ms. */
const READ_TIMEOUT_MS = 10_000;

export interface ReadFreshnessOptions {
  /** Bootstrap brokers, `host:port`. */
  brokers: string[];
  /** Freshness topic (Sluice config `topics.freshness`). Default `"sluice.freshness"`. */
  topic?: string;
  /** Only heartbeats of this Sluice consumer group. Default: all groups. */
  groupId?: string;
  /** Read heartbeats emitted in this window before now, ms. Default 300000 (5 min). */
  lookbackMs?: number;
  /** Give up reading after this long, ms (returns what was read). Default 10000. */
  timeoutMs?: number;
  /** Extra kafkajs client settings (ssl, sasl, clientId). */
  kafka?: KafkaClientSettings;
}

/**
 * Latest freshness heartbeat per (group, request topic, partition), from the Sluice freshness topic.
 *
 * A heartbeat's `completeUpToMs` = T means: every request record with a Kafka timestamp ≤ T on that
 * partition has a committed result or dead letter (readable with `isolation.level=read_committed`).
 * The minimum `completeUpToMs` over a topic's partitions is how far that topic's results are
 * complete. `emittedAtMs` tells whether the instance is alive: heartbeats arrive every
 * `observability.heartbeatIntervalMs`. `lagRecords`/`lagSeconds` are -1 when not yet measured.
 *
 * ```ts
 * const beats = await readFreshness({ brokers: ["localhost:9092"], groupId: "sluice" });
 * const upTo = Math.min(...beats.filter((b) => b.topic === "sluice.requests").map((b) => b.completeUpToMs ?? 0));
 * ```
 */
export async function readFreshness(opts: ReadFreshnessOptions): Promise<FreshnessHeartbeat[]> {
  const { topic = DEFAULT_FRESHNESS_TOPIC, lookbackMs = LOOKBACK_MS, timeoutMs = READ_TIMEOUT_MS } = opts;
  if (opts.brokers.length === 0)
    throw new SluiceError("CONFIG_INVALID", "readFreshness needs at least one broker");
  if (!(lookbackMs > 0) || !(timeoutMs > 0)) {
    throw new SluiceError("CONFIG_INVALID", "readFreshness lookbackMs and timeoutMs must be > 0");
  }
  // The project's one client factory: read_committed fix and failure classification included.
  const kafka = createKafkaFromClientConfig({
    clientId: "sluice-freshness-reader",
    ...opts.kafka,
    brokers: opts.brokers,
  });

  const access: KafkaAccess[] = [
    { operation: "DESCRIBE", resourceType: "TOPIC", names: [topic] },
    { operation: "READ", resourceType: "TOPIC", names: [topic] },
  ];
  // Where to start (first heartbeat inside the window) and stop (current end) per partition.
  const ranges = new Map<number, { start: bigint; end: bigint }>();
  const admin = kafka.admin();
  try {
    await admin.connect();
    const ends = await admin.fetchTopicOffsets(topic);
    const starts = await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() - lookbackMs);
    for (const e of ends) {
      const s = starts.find((x) => x.partition === e.partition);
      const end = BigInt(e.high);
      const start = s && BigInt(s.offset) >= 0n ? BigInt(s.offset) : end;
      if (start < end) ranges.set(e.partition, { start, end });
    }
  } catch (cause) {
    throw (
      kafkaFailure(cause, { doing: `reading the offsets of freshness topic "${topic}"`, kafka, access }) ??
      new SluiceError(
        "BROKER_UNAVAILABLE",
        `Cannot read freshness topic "${topic}": ${(cause as Error).message}; check the brokers and topics.freshness`,
        { retriable: true, cause },
      )
    );
  } finally {
    await admin.disconnect().catch(() => {});
  }

  const latest = new Map<string, FreshnessHeartbeat>();
  try {
    await readBounded({
      kafka,
      ranges: [...ranges].map(([partition, r]) => ({
        topic,
        partition,
        fromOffset: r.start.toString(),
        endOffset: r.end.toString(),
      })),
      order: "parallel",
      doing: `reading freshness heartbeats from "${topic}"`,
      timeoutMs,
      onBatch: (_range, messages) => {
        for (const m of messages) {
          if (!m.value) continue;
          let hb: FreshnessHeartbeat;
          try {
            hb = decodeHeartbeat(m.value);
          } catch {
            continue; // not a heartbeat: someone else wrote to the topic; skip it
          }
          if (opts.groupId !== undefined && hb.groupId !== opts.groupId) continue;
          const k = `${hb.groupId}\u0000${hb.topic}\u0000${hb.partition}`;
          const prev = latest.get(k);
          if (!prev || hb.emittedAtMs >= prev.emittedAtMs) latest.set(k, hb);
        }
        return undefined;
      },
    });
  } catch (cause) {
    throw (
      kafkaFailure(cause, { doing: `reading freshness heartbeats from "${topic}"`, kafka, access }) ??
      new SluiceError(
        "BROKER_UNAVAILABLE",
        `Reading freshness heartbeats failed: ${(cause as Error).message}`,
        {
          retriable: true,
          cause,
        },
      )
    );
  }
  return [...latest.values()].sort((a, b) =>
    a.groupId !== b.groupId
      ? a.groupId.localeCompare(b.groupId)
      : a.topic !== b.topic
        ? a.topic.localeCompare(b.topic)
        : a.partition - b.partition,
  );
}
