/** One partition of one topic. */
export interface TopicPartition {
  topic: string;
  partition: number;
}

/**
 * The one map key for a topic-partition. NUL cannot occur in a Kafka topic name (letters, digits,
 * '.', '_' and '-'), so the key is unambiguous.
 */
export function topicPartitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

/** Groups partitions by topic, first-seen order kept (for events and kafkajs pause/resume). */
export function partitionsByTopic(tps: readonly TopicPartition[]): Map<string, number[]> {
  const byTopic = new Map<string, number[]>();
  for (const { topic, partition } of tps) {
    const list = byTopic.get(topic);
    if (list) list.push(partition);
    else byTopic.set(topic, [partition]);
  }
  return byTopic;
}
