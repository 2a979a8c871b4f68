import type { Kafka } from "kafkajs";
import { withAdmin } from "../client/admin-session.js";

/** What the group coordinator says about a consumer group (DescribeGroups). */
export interface ConsumerGroupState {
  groupId: string;
  /**
   * Kafka's group state: `Stable`, `PreparingRebalance`, `CompletingRebalance`, `Empty` (no members,
   * committed offsets kept), or `Dead` (the coordinator knows no such group: it never existed, or its
   * offsets expired).
   */
  state: string;
  members: number;
}

export async function describeConsumerGroup(kafka: Kafka, groupId: string): Promise<ConsumerGroupState> {
  return withAdmin(kafka, async (admin) => {
    const { groups } = await admin.describeGroups([groupId]);
    const group = groups.find((g) => g.groupId === groupId);
    return { groupId, state: group?.state ?? "Dead", members: group?.members.length ?? 0 };
  });
}
