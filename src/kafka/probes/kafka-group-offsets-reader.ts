import type { Admin, Kafka } from "kafkajs";
import { topicPartitionKey } from "../../contracts/topic-partition.js";
import type { GroupOffsetsReader, PartitionOffsets } from "../../observability/group-offsets-reader.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure } from "../client/kafka-failure.js";

/**
 * `GroupOffsetsReader` on Kafka: `fetchTopicOffsets` (log start and end) and `fetchOffsets` (the
 * group's commits) on one admin client, connected on first use and kept for the next sample (the lag
 * monitor reads every few seconds). Failures are classified by `kafkaFailure`, else BROKER_UNAVAILABLE.
 */
export class KafkaGroupOffsetsReader implements GroupOffsetsReader {
  private admin: Admin | undefined;
  private connecting: Promise<Admin> | undefined;

  constructor(private readonly kafka: Kafka) {}

  async partitionOffsets(groupId: string, topics: readonly string[]): Promise<PartitionOffsets[]> {
    const names = topics.join(", ");
    return this.withAdmin(
      async (admin) => {
        const ends = await Promise.all(
          topics.map(async (topic) => ({ topic, offsets: await admin.fetchTopicOffsets(topic) })),
        );
        const commits = await admin.fetchOffsets({ groupId, topics: [...topics] });
        const committed = new Map<string, string>();
        for (const t of commits)
          for (const p of t.partitions) committed.set(topicPartitionKey(t.topic, p.partition), p.offset);
        return ends.flatMap(({ topic, offsets }) =>
          [...offsets]
            .sort((a, b) => a.partition - b.partition)
            .map((o) => {
              const raw = committed.get(topicPartitionKey(topic, o.partition));
              return {
                topic,
                partition: o.partition,
                logStartOffset: o.low,
                logEndOffset: o.high,
                // kafkajs reports "-1" for a partition the group never committed on.
                committedOffset: raw === undefined || BigInt(raw) < 0n ? null : raw,
              };
            }),
        );
      },
      {
        doing: `reading the offsets of group ${groupId} on ${names}`,
        access: [
          { operation: "DESCRIBE", resourceType: "GROUP", names: [groupId] },
          { operation: "DESCRIBE", resourceType: "TOPIC", names: topics },
        ],
        unavailable: `Cannot read offsets of group "${groupId}" on ${names}`,
        fix: "; check the brokers and that the topics exist",
      },
    );
  }

  async committedTopics(groupId: string): Promise<string[]> {
    return this.withAdmin(
      async (admin) => {
        const offsets = await admin.fetchOffsets({ groupId });
        return offsets.filter((t) => t.partitions.some((p) => Number(p.offset) >= 0)).map((t) => t.topic);
      },
      {
        doing: `reading the committed offsets of group ${groupId}`,
        access: [{ operation: "DESCRIBE", resourceType: "GROUP", names: [groupId] }],
        unavailable: `Cannot read group "${groupId}"`,
        fix: "",
      },
    );
  }

  async close(): Promise<void> {
    const admin = this.admin ?? (await this.connecting?.catch(() => undefined));
    this.admin = undefined;
    this.connecting = undefined;
    await admin?.disconnect().catch(() => {});
  }

  private async withAdmin<T>(
    fn: (admin: Admin) => Promise<T>,
    failure: { doing: string; access: KafkaAccess[]; unavailable: string; fix: string },
  ): Promise<T> {
    try {
      return await fn(await this.connect());
    } catch (cause) {
      throw (
        kafkaFailure(cause, { doing: failure.doing, kafka: this.kafka, access: failure.access }) ??
        new SluiceError(
          "BROKER_UNAVAILABLE",
          `${failure.unavailable}: ${(cause as Error).message}${failure.fix}`,
          {
            retriable: true,
            cause,
          },
        )
      );
    }
  }

  private connect(): Promise<Admin> {
    if (this.admin) return Promise.resolve(this.admin);
    if (!this.connecting) {
      const admin = this.kafka.admin();
      this.connecting = admin.connect().then(
        () => {
          this.admin = admin;
          return admin;
        },
        async (error: unknown) => {
          // A failed connect may leave kafkajs retrying sockets behind: give them back.
          await admin.disconnect().catch(() => {});
          throw error;
        },
      );
      this.connecting.catch(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }
}
