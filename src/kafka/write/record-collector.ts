import type { IHeaders } from "kafkajs";
import { estimateBytes, type OutboundMessage } from "../../delivery/outbound-message.js";

/**
 * How records become produce requests, for every Sluice writer (the result publishers, batch mode's
 * topic sink and the backfill run writer), in the role of Kafka Streams' `RecordCollector`: byte-bounded
 * chunks, each one `sendBatch` call.
 *
 * kafkajs puts all messages of one partition in a call into a single record batch and does not split
 * it, and the broker refuses a batch above the topic's `max.message.bytes` (broker default
 * `message.max.bytes`, 1 MiB) with MESSAGE_TOO_LARGE. A chunk bounded by records (500 embedding
 * results of ~8 KB to one partition) fails on every retry, so chunks are bounded by bytes: by the
 * writer's `SendBound` (src/delivery/size-refusal.ts: at most `delivery.maxTransactionBytes` and
 * MAX_SEND_BYTES, half the broker default, and halved after each refused send of several records, so a
 * topic with a smaller limit is learned from the broker's refusals, not configured twice).
 */

type KafkaMessageOut = Omit<OutboundMessage, "topic" | "headers"> & { headers?: IHeaders };
export type TopicMessages = { topic: string; messages: KafkaMessageOut[] }[];

/**
 * Splits messages (order kept) into sendBatch payloads: consecutive runs of at most `maxBytes`
 * (estimated, `estimateBytes`); a record bigger than that goes alone. `toTopicMessages` makes one
 * payload of each.
 */
export function chunks(messages: readonly OutboundMessage[], maxBytes: number): OutboundMessage[][] {
  const out: OutboundMessage[][] = [];
  let current: OutboundMessage[] = [];
  let bytes = 0;
  for (const m of messages) {
    const size = estimateBytes(m);
    if (current.length > 0 && bytes + size > maxBytes) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** One sendBatch payload: the chunk's messages grouped by topic, order kept within each topic. */
export function toTopicMessages(messages: OutboundMessage[]): TopicMessages {
  const grouped = new Map<string, KafkaMessageOut[]>();
  for (const { topic, key, value, headers, timestamp, partition } of messages) {
    let list = grouped.get(topic);
    if (!list) {
      list = [];
      grouped.set(topic, list);
    }
    list.push({ key, value, headers, timestamp, partition });
  }
  return [...grouped].map(([topic, list]) => ({ topic, messages: list }));
}
