import type { Admin, Kafka } from "kafkajs";
import { type TopicPartition, topicPartitionKey } from "../../contracts/topic-partition.js";
import { kafkaFailure } from "../client/kafka-failure.js";
import { ChangelogReader, type RestoredPartition } from "./changelog-reader.js";

/**
 * Where a partition restore reads from: the group's committed offsets (admin) and the dedup
 * changelog (ChangelogReader). The admin connects on first use and lives until `close()`.
 */
export class KafkaRestoreSources {
  private readonly kafka: Kafka;
  private readonly groupId: string;
  private readonly reader: ChangelogReader;
  private admin: Promise<Admin> | undefined;

  constructor(options: { kafka: Kafka; groupId: string; restoreTimeoutMs: number }) {
    this.kafka = options.kafka;
    this.groupId = options.groupId;
    this.reader = new ChangelogReader({ kafka: options.kafka, timeoutMs: options.restoreTimeoutMs });
  }

  /** Committed offset per partition key; without one, the partition's earliest offset. */
  async committedOffsets(tps: readonly TopicPartition[]): Promise<Map<string, string>> {
    try {
      return await this.readCommittedOffsets(tps);
    } catch (error) {
      throw (
        kafkaFailure(error, {
          doing: `reading the committed offsets of group ${this.groupId}`,
          kafka: this.kafka,
          access: [
            { operation: "READ", resourceType: "GROUP", names: [this.groupId] },
            { operation: "READ", resourceType: "TOPIC", names: [...new Set(tps.map((t) => t.topic))] },
          ],
        }) ?? error
      );
    }
  }

  private async readCommittedOffsets(tps: readonly TopicPartition[]): Promise<Map<string, string>> {
    const admin = await this.connected();
    const out = new Map<string, string>();
    const topics = [...new Set(tps.map((t) => t.topic))];
    const committed = await admin.fetchOffsets({ groupId: this.groupId, topics });
    for (const t of committed) {
      const low = new Map<number, string>();
      const needLow = t.partitions.some((p) => p.offset === "-1" || p.offset === "");
      if (needLow) for (const p of await admin.fetchTopicOffsets(t.topic)) low.set(p.partition, p.low);
      for (const p of t.partitions) {
        const offset = p.offset === "-1" || p.offset === "" ? (low.get(p.partition) ?? "0") : p.offset;
        out.set(topicPartitionKey(t.topic, p.partition), offset);
      }
    }
    return out;
  }

  readChangelog(topic: string, partitions: readonly number[]): Promise<Map<number, RestoredPartition>> {
    return this.reader.read(topic, partitions);
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    if (admin) await (await admin.catch(() => undefined))?.disconnect().catch(() => undefined);
  }

  private connected(): Promise<Admin> {
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      try {
        await admin.connect();
      } catch (error) {
        this.admin = undefined;
        await admin.disconnect().catch(() => undefined);
        throw error;
      }
      return admin;
    })();
    return this.admin;
  }
}
