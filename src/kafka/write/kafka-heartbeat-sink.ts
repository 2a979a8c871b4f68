import type { Kafka, Producer } from "kafkajs";
import {
  encodeHeartbeat,
  type FreshnessHeartbeat,
  HEARTBEAT_CONTENT_TYPE,
} from "../../contracts/freshness-heartbeat.js";
import type { HeartbeatSink } from "../../observability/heartbeat-sink.js";
import { SluiceError } from "../../sluice-error.js";
import { kafkaFailure } from "../client/kafka-failure.js";

export interface KafkaHeartbeatSinkOptions {
  /** The freshness topic (config `topics.freshness`). */
  topic: string;
}

/**
 * `HeartbeatSink` on Kafka: one Avro record per beat on the freshness topic (schema
 * schemas/freshness-heartbeat.avsc), keyed `<groupId>/<topic>/<partition>` so a compacted topic keeps
 * the latest, with headers `content-type` and `sluice-instance-id`; an idempotent producer, acks all.
 */
export class KafkaHeartbeatSink implements HeartbeatSink {
  private readonly topic: string;
  private producer: Producer | undefined;

  constructor(
    private readonly kafka: Kafka,
    opts: KafkaHeartbeatSinkOptions,
  ) {
    this.topic = opts.topic;
  }

  async connect(): Promise<void> {
    await this.connected();
  }

  async publish(beats: readonly FreshnessHeartbeat[]): Promise<void> {
    if (beats.length === 0) return;
    const producer = await this.connected();
    try {
      await producer.send({
        topic: this.topic,
        acks: -1,
        messages: beats.map((hb) => ({
          // Keyed per group and input partition, so a compacted freshness topic keeps the latest.
          key: `${hb.groupId}/${hb.topic}/${hb.partition}`,
          value: encodeHeartbeat(hb),
          timestamp: String(hb.emittedAtMs),
          headers: { "content-type": HEARTBEAT_CONTENT_TYPE, "sluice-instance-id": hb.instanceId },
        })),
      });
    } catch (error) {
      // A producer left connected after a refusal keeps its TLS socket, and with it the whole process,
      // alive: give it back; the next beat connects a fresh one.
      if (this.producer === producer) this.producer = undefined;
      await producer.disconnect().catch(() => undefined);
      throw this.failure(error, "publishing freshness heartbeats") ?? error;
    }
  }

  async close(): Promise<void> {
    const producer = this.producer;
    this.producer = undefined;
    await producer?.disconnect().catch(() => {});
  }

  private failure(error: unknown, doing: string): SluiceError | undefined {
    return kafkaFailure(error, {
      doing,
      kafka: this.kafka,
      access: [{ operation: "WRITE", resourceType: "TOPIC", names: [this.topic] }],
    });
  }

  private async connected(): Promise<Producer> {
    if (this.producer) return this.producer;
    const producer = this.kafka.producer({ allowAutoTopicCreation: false, idempotent: true });
    try {
      await producer.connect();
    } catch (cause) {
      await producer.disconnect().catch(() => undefined);
      throw (
        this.failure(cause, "connecting the freshness heartbeat producer") ??
        new SluiceError(
          "BROKER_UNAVAILABLE",
          `Cannot connect the freshness heartbeat producer: ${(cause as Error).message}`,
          { retriable: true, cause },
        )
      );
    }
    this.producer = producer;
    return producer;
  }
}
