import type { IHeaders, Kafka, Producer } from "kafkajs";
import { estimateBytes, type OutboundMessage } from "../delivery/outbound-message.js";
import { SluiceError } from "../sluice-error.js";
import { errorChain, type KafkaAccess, kafkaFailure, narrowTopicDenial } from "./kafka-failure.js";

/**
 * What one commit of an input partition publishes: the outputs (results, dead letters), the
 * bookkeeping (dedup changelog entries and the offset checkpoint) and the consumer offset
 * (`nextOffset` = last covered offset + 1).
 */
export interface PublishUnit {
  outputs: OutboundMessage[];
  bookkeeping: OutboundMessage[];
  nextOffset: string;
}

/**
 * How a `PartitionCommitter` makes a unit visible. Implementations throw a classified `SluiceError`
 * (PRODUCER_FENCED, TRANSACTION_FAILED or PUBLISH_FAILED) and are not used again after a throw,
 * except PUBLISH_TOO_LARGE: the broker refused a record or batch as too large, the unit was aborted
 * (transactions) and the publisher stays usable, so the caller can retry in smaller units.
 */
export interface ResultPublisher {
  publish(unit: PublishUnit): Promise<void>;
  close(): Promise<void>;
}

export interface PublisherTarget {
  kafka: Kafka;
  groupId: string;
  /** Input topic-partition whose outputs and offset are published. */
  topic: string;
  partition: number;
}

/**
 * Exactly-once-style: one Kafka transaction per unit holding outputs, bookkeeping and the consumer
 * offset (`sendOffsets`). The transactional id is derived from group, topic and partition (kafkajs
 * 2.2.4 has no KIP-447, see docs/exactly-once.md); `create()` initialises it, which fences any
 * previous owner and aborts the transaction it left open.
 */
export class TransactionalPublisher implements ResultPublisher {
  private constructor(
    private readonly target: PublisherTarget,
    private readonly options: { transactionTimeoutMs: number },
    private producer: Producer,
  ) {}

  static transactionalId(groupId: string, topic: string, partition: number): string {
    return `${TransactionalPublisher.transactionalIdPrefix(groupId)}${topic}-${partition}`;
  }

  /** Every transactional id of a group starts with this (its ACL is a PREFIXED one). */
  static transactionalIdPrefix(groupId: string): string {
    return `sluice-${groupId}-`;
  }

  static async create(
    target: PublisherTarget,
    options: { transactionTimeoutMs: number },
  ): Promise<TransactionalPublisher> {
    return new TransactionalPublisher(target, options, await TransactionalPublisher.connect(target, options));
  }

  /** Connects a producer and initialises the transactional id (fencing any other holder of it). */
  private static async connect(
    target: PublisherTarget,
    options: { transactionTimeoutMs: number },
  ): Promise<Producer> {
    const producer = target.kafka.producer({
      transactionalId: TransactionalPublisher.transactionalId(target.groupId, target.topic, target.partition),
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: options.transactionTimeoutMs,
      allowAutoTopicCreation: false,
    });
    try {
      await producer.connect();
      // kafkajs initialises the transactional id lazily on the first transaction(); do it now so
      // the previous owner is fenced (and its open transaction aborted) before we read offsets.
      const txn = await producer.transaction();
      await txn.abort(); // nothing was added: local state change only, no EndTxn request
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw (
        kafkaFailure(error, {
          doing: `initialising the transactional producer of ${target.topic}[${target.partition}]`,
          kafka: target.kafka,
          access: [transactionalAccess(target)],
        }) ?? classify(error, target.topic, target.partition, "initialising the transactional producer")
      );
    }
    return producer;
  }

  async publish(unit: PublishUnit): Promise<void> {
    const messages = [...unit.outputs, ...unit.bookkeeping];
    let txn: Awaited<ReturnType<Producer["transaction"]>> | undefined;
    try {
      txn = await this.producer.transaction();
      for (const topicMessages of chunked(messages)) await txn.sendBatch({ topicMessages });
      await txn.sendOffsets({
        consumerGroupId: this.target.groupId,
        topics: [
          {
            topic: this.target.topic,
            partitions: [{ partition: this.target.partition, offset: unit.nextOffset }],
          },
        ],
      });
      await txn.commit();
    } catch (error) {
      const denied = kafkaFailure(error, {
        doing: `committing a transaction of ${this.target.topic}[${this.target.partition}]`,
        kafka: this.target.kafka,
        access: unitAccess(this.target, messages, true),
      });
      const failure = denied
        ? await narrowTopicDenial(denied, this.target.kafka)
        : classify(error, this.target.topic, this.target.partition, "committing a transaction");
      if (txn && failure.code !== "PRODUCER_FENCED") await txn.abort().catch(() => undefined);
      if (failure.code === "PUBLISH_TOO_LARGE") await this.renew();
      throw failure;
    }
  }

  /**
   * After a refused produce request the producer's sequence numbers are wrong: kafkajs rolls back
   * the sequence of every partition in the request, also of those the broker accepted, and the next
   * send fails with OUT_OF_ORDER_SEQUENCE_NUMBER. A fresh producer with the same transactional id
   * starts a new epoch and clean sequences (and fences only the old producer, which is ours).
   */
  private async renew(): Promise<void> {
    const old = this.producer;
    await old.disconnect().catch(() => undefined);
    this.producer = await TransactionalPublisher.connect(this.target, this.options);
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
  }
}

/**
 * At-least-once (`delivery.transactions=false`): a plain idempotent producer. Per unit: send the
 * outputs and wait for their acks, then the bookkeeping, then commit the consumer offset through the
 * group member (`commitOffsets`). The order makes every visible changelog entry or checkpoint imply
 * that its outputs are durable, so restoring dedup from the changelog never hides an unpublished
 * result. A crash between the sends and the offset commit republishes the uncommitted records
 * (duplicates, unless the changelog entry landed and dedup catches them). No fencing: a zombie can
 * publish until its group membership expires.
 */
export class AtLeastOncePublisher implements ResultPublisher {
  private constructor(
    private readonly target: PublisherTarget,
    private producer: Producer,
    private readonly commitOffset: (nextOffset: string) => Promise<void>,
  ) {}

  static async create(
    target: PublisherTarget,
    commitOffset: (nextOffset: string) => Promise<void>,
  ): Promise<AtLeastOncePublisher> {
    return new AtLeastOncePublisher(target, await AtLeastOncePublisher.connect(target), commitOffset);
  }

  private static async connect(target: PublisherTarget): Promise<Producer> {
    // Idempotent: retries inside one producer session never duplicate or reorder a partition's records.
    const producer = target.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    });
    try {
      await producer.connect();
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw (
        kafkaFailure(error, { doing: "connecting the producer", kafka: target.kafka }) ??
        publishFailed(error, target, "connecting the producer")
      );
    }
    return producer;
  }

  async publish(unit: PublishUnit): Promise<void> {
    try {
      for (const topicMessages of chunked(unit.outputs)) await this.producer.sendBatch({ topicMessages });
      for (const topicMessages of chunked(unit.bookkeeping)) await this.producer.sendBatch({ topicMessages });
    } catch (error) {
      if (isTooLarge(error)) {
        // Same sequence problem as TransactionalPublisher.renew: continue with a fresh producer id.
        await this.producer.disconnect().catch(() => undefined);
        this.producer = await AtLeastOncePublisher.connect(this.target);
        throw tooLarge(error, this.target.topic, this.target.partition);
      }
      const denied = kafkaFailure(error, {
        doing: `publishing results of ${this.target.topic}[${this.target.partition}]`,
        kafka: this.target.kafka,
        access: unitAccess(this.target, [...unit.outputs, ...unit.bookkeeping], false),
      });
      throw denied
        ? await narrowTopicDenial(denied, this.target.kafka)
        : publishFailed(error, this.target, "publishing results");
    }
    try {
      await this.commitOffset(unit.nextOffset);
    } catch (error) {
      throw (
        kafkaFailure(error, {
          doing: `committing offset ${unit.nextOffset} of ${this.target.topic}[${this.target.partition}]`,
          kafka: this.target.kafka,
          access: [{ operation: "READ", resourceType: "GROUP", names: [this.target.groupId] }],
        }) ?? publishFailed(error, this.target, `committing offset ${unit.nextOffset}`)
      );
    }
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
  }
}

/**
 * Bytes per `sendBatch` call. kafkajs puts all messages of one partition in a call into a single record
 * batch and does not split it, and the broker rejects a batch above `message.max.bytes` (default
 * 1 MiB) with MESSAGE_TOO_LARGE. A fast model fills one commit interval with thousands of results, so
 * without chunking the transaction fails, the partition is reset, redone and fails again.
 */
export const MAX_SEND_BYTES = 512 * 1024;

type KafkaMessageOut = Omit<OutboundMessage, "topic" | "headers"> & { headers?: IHeaders };
type TopicMessages = { topic: string; messages: KafkaMessageOut[] }[];

/** Splits messages (order kept) into sendBatch payloads of at most `maxBytes` (estimated) each. */
export function chunked(messages: OutboundMessage[], maxBytes = MAX_SEND_BYTES): TopicMessages[] {
  const out: TopicMessages[] = [];
  let current: OutboundMessage[] = [];
  let bytes = 0;
  for (const m of messages) {
    const size = estimateBytes(m);
    if (current.length > 0 && bytes + size > maxBytes) {
      out.push(byTopic(current));
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) out.push(byTopic(current));
  return out;
}

function byTopic(messages: OutboundMessage[]): TopicMessages {
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

function publishFailed(error: unknown, target: PublisherTarget, doing: string): SluiceError {
  const message = error instanceof Error ? error.message : String(error);
  return new SluiceError(
    "PUBLISH_FAILED",
    `${doing} for ${target.topic}[${target.partition}] failed (at-least-once; the partition is reprocessed from its committed offset, so some results may be published twice): ${message}`,
    { retriable: true, cause: error, context: { topic: target.topic, partition: target.partition } },
  );
}

/** True when the broker refused a record or record batch as too large (not worth retrying as is). */
export function isTooLarge(error: unknown): boolean {
  return errorChain(error).some((e) => {
    const type = (e as { type?: unknown }).type;
    return type === "MESSAGE_TOO_LARGE" || type === "RECORD_LIST_TOO_LARGE";
  });
}

function tooLarge(error: unknown, topic: string, partition: number): SluiceError {
  const message = error instanceof Error ? error.message : String(error);
  return new SluiceError(
    "PUBLISH_TOO_LARGE",
    `the broker refused outputs of ${topic}[${partition}] as too large (${message}); they are retried in smaller units`,
    { retriable: true, cause: error, context: { topic, partition } },
  );
}

/**
 * Maps a kafkajs error (possibly wrapped in retry errors) to PRODUCER_FENCED, PUBLISH_TOO_LARGE or
 * TRANSACTION_FAILED.
 */
export function classify(error: unknown, topic: string, partition: number, doing: string): SluiceError {
  if (isTooLarge(error)) return tooLarge(error, topic, partition);
  const fenced = errorChain(error).some((e) => {
    const type = (e as { type?: unknown }).type;
    return (
      type === "INVALID_PRODUCER_EPOCH" ||
      type === "PRODUCER_FENCED" ||
      (e instanceof Error && /fenced|producer epoch/i.test(e.message))
    );
  });
  const message = error instanceof Error ? error.message : String(error);
  return fenced
    ? new SluiceError(
        "PRODUCER_FENCED",
        `partition ${topic}[${partition}] is owned by another instance now (fenced while ${doing}); its in-flight work is dropped and the partition is reclaimed from its committed offset if still assigned`,
        { cause: error, context: { topic, partition } },
      )
    : new SluiceError("TRANSACTION_FAILED", `${doing} for ${topic}[${partition}] failed: ${message}`, {
        retriable: true,
        cause: error,
        context: { topic, partition },
      });
}

function transactionalAccess(target: PublisherTarget): KafkaAccess {
  return {
    operation: "WRITE",
    resourceType: "TRANSACTIONAL_ID",
    names: [TransactionalPublisher.transactionalIdPrefix(target.groupId)],
    prefixed: true,
  };
}

/** What publishing `messages` needs: WRITE on their topics, and for transactions the id and the group. */
function unitAccess(
  target: PublisherTarget,
  messages: OutboundMessage[],
  transactional: boolean,
): KafkaAccess[] {
  const topics = [...new Set(messages.map((m) => m.topic))];
  const access: KafkaAccess[] = [{ operation: "WRITE", resourceType: "TOPIC", names: topics }];
  if (transactional) {
    access.push(transactionalAccess(target));
    access.push({ operation: "READ", resourceType: "GROUP", names: [target.groupId] });
  }
  return access;
}
