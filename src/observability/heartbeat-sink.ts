import type { FreshnessHeartbeat } from "../contracts/freshness-heartbeat.js";

/**
 * Port: where `HeartbeatPublisher` publishes its beats. The Kafka implementation is
 * `KafkaHeartbeatSink` (src/kafka/write/kafka-heartbeat-sink.ts): the freshness topic, one Avro record per
 * beat. Failures are SluiceErrors (an access failure, or BROKER_UNAVAILABLE) or the transport's own.
 */
export interface HeartbeatSink {
  /** Connects; publishing connects on its own too, this only makes a bad setup fail at start-up. */
  connect(): Promise<void>;
  /** Publishes the beats (one per owned partition) durably; resolves once the transport acknowledged. */
  publish(beats: readonly FreshnessHeartbeat[]): Promise<void>;
  /** Releases the connection. Safe to call twice. */
  close(): Promise<void>;
}
