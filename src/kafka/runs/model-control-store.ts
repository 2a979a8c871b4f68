import type { Kafka } from "kafkajs";
import {
  decisionKey,
  emptyModelControl,
  encodeModelControl,
  foldModelControl,
  type ModelControlState,
  type ModelDecision,
} from "../../contracts/model-control.js";
import { withAdmin } from "../client/admin-session.js";
import { ensureCompactedTopic } from "../client/topic-admin.js";
import { readKafkaRanges } from "../read/kafka-range-reader.js";

export interface ModelControlStoreOptions {
  kafka: Kafka;
  /** `topics.modelControl`: compacted, one partition. */
  topic: string;
  replicationFactor: number;
}

/** A member of the serve group and the partitions it owns now (from the group's description). */
export interface GroupMember {
  memberId: string;
  clientId: string;
  host: string;
  partitions: { topic: string; partition: number }[];
}

/**
 * The model control topic (src/contracts/model-control.ts; docs/model-upgrades.md): decisions that
 * `sluice model promote|rollback` write, boundaries that serve writes in its partitions'
 * transactions. One partition, so every reader sees decisions and boundaries in one order.
 */
export class ModelControlStore {
  constructor(private readonly opts: ModelControlStoreOptions) {}

  get topic(): string {
    return this.opts.topic;
  }

  /** Creates the topic (1 partition, cleanup.policy=compact) if it does not exist. */
  async ensureTopic(): Promise<void> {
    await ensureCompactedTopic(
      this.opts.kafka,
      this.opts.topic,
      this.opts.replicationFactor,
      `the model control topic ${this.opts.topic} (topics.modelControl)`,
    );
  }

  /** Everything the topic says of `groupId` now (read_committed: aborted boundaries are not seen). */
  async read(groupId: string): Promise<ModelControlState> {
    const state = emptyModelControl();
    const ranges = await withAdmin(this.opts.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(this.opts.topic)) return [];
      const offsets = await admin.fetchTopicOffsets(this.opts.topic);
      return offsets.map((o) => ({ partition: o.partition, startOffset: o.low, endOffset: o.high }));
    });
    for await (const { message } of readKafkaRanges({
      kafka: this.opts.kafka,
      topic: this.opts.topic,
      ranges,
    })) {
      foldModelControl(state, groupId, message.value);
    }
    return state;
  }

  /** Writes a decision (idempotent producer, all in-sync replicas). */
  async writeDecision(decision: ModelDecision): Promise<void> {
    const producer = this.opts.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    try {
      await producer.send({
        topic: this.opts.topic,
        acks: -1,
        messages: [{ key: decisionKey(decision.groupId, decision.seq), value: encodeModelControl(decision) }],
      });
    } finally {
      await producer.disconnect().catch(() => undefined);
    }
  }

  /** The serve group's members and their partitions now; empty when the group has none. */
  async members(groupId: string): Promise<GroupMember[]> {
    return withAdmin(this.opts.kafka, async (admin) => {
      // Loaded here, not at the top: `sluice acls` reads this module's group prefix without kafkajs.
      const { AssignerProtocol } = await import("kafkajs");
      const { groups } = await admin.describeGroups([groupId]);
      return (groups[0]?.members ?? []).map((m) => {
        const decoded =
          m.memberAssignment.length > 0 ? AssignerProtocol.MemberAssignment.decode(m.memberAssignment) : null;
        const partitions = Object.entries(decoded?.assignment ?? {}).flatMap(([topic, ps]) =>
          ps.map((partition) => ({ topic, partition })),
        );
        return { memberId: m.memberId, clientId: m.clientId, host: m.clientHost, partitions };
      });
    });
  }

  /** Partitions of `topics` (for the boundaries a decision needs). */
  async partitionsOf(topics: readonly string[]): Promise<{ topic: string; partition: number }[]> {
    return withAdmin(this.opts.kafka, async (admin) => {
      const out: { topic: string; partition: number }[] = [];
      for (const topic of topics) {
        for (const p of await admin.fetchTopicOffsets(topic)) out.push({ topic, partition: p.partition });
      }
      return out;
    });
  }
}
