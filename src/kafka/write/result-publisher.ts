import type { Kafka, Producer } from "kafkajs";
import type { OutboundMessage } from "../../delivery/outbound-message.js";
import type { PublishUnit, ResultPublisher } from "../../delivery/partition-committer.js";
import { SendBound } from "../../delivery/size-refusal.js";
import { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure, narrowTopicDenial } from "../client/kafka-failure.js";
import { keyPartitioner } from "../protocol/key-partitioner.js";
import { isTooLarge, partitionSubject, tooLarge } from "./produce-failure.js";
import { chunks, toTopicMessages } from "./record-collector.js";
import { TransactionalProducer } from "./transactional-producer.js";

/**
 * The Kafka side of a partition's commits (src/delivery/partition-committer.ts holds the rules):
 * one publisher per input topic-partition, transactional (default) or at least once.
 */
export interface PublisherTarget {
  kafka: Kafka;
  groupId: string;
  /** Input topic-partition whose outputs and offset are published. */
  topic: string;
  partition: number;
}

export interface ResultPublisherOptions {
  /** `delivery.transactions`: one Kafka transaction per unit; false = at-least-once. */
  transactions: boolean;
  /** `delivery.transactionTimeoutMs`. */
  transactionTimeoutMs: number;
  /** `delivery.maxTransactionBytes`: also where each send's bound starts (size-refusal.ts `SendBound`). */
  maxTransactionBytes: number;
  /** At-least-once only (required then): commits the group offset (next offset to read) through the consumer. */
  commitOffset?: (nextOffset: string) => Promise<void>;
}

/** Every transactional id of a group's result publishers starts with this (its ACL is a PREFIXED one). */
export function resultTransactionalIdPrefix(groupId: string): string {
  return `sluice-${groupId}-`;
}

/** The transactional id of one input partition's publisher (kafkajs 2.2.4 has no KIP-447, see docs/exactly-once.md). */
export function resultTransactionalId(groupId: string, topic: string, partition: number): string {
  return `${resultTransactionalIdPrefix(groupId)}${topic}-${partition}`;
}

/**
 * Connects the publisher of one input partition. With transactions this initialises the
 * partition's transactional id, fencing any previous owner and aborting the transaction it left open:
 * do this before reading the committed offset.
 */
export async function createResultPublisher(
  target: PublisherTarget,
  options: ResultPublisherOptions,
): Promise<ResultPublisher> {
  if (options.transactions) return TransactionalPublisher.create(target, options);
  if (!options.commitOffset) {
    throw new SluiceError(
      "CONFIG_INVALID",
      "the at-least-once publisher (delivery.transactions=false) needs commitOffset to commit the consumer offset",
    );
  }
  return AtLeastOncePublisher.create(target, options.commitOffset, options.maxTransactionBytes);
}

/**
 * Exactly-once-style: one Kafka transaction per unit holding outputs, bookkeeping and the consumer
 * offset (`sendOffsets`), through the one transactional write path (transactional-producer.ts).
 */
class TransactionalPublisher implements ResultPublisher {
  private constructor(
    private readonly target: PublisherTarget,
    private readonly producer: TransactionalProducer,
  ) {}

  static async create(
    target: PublisherTarget,
    options: ResultPublisherOptions,
  ): Promise<TransactionalPublisher> {
    const producer = await TransactionalProducer.open({
      kafka: target.kafka,
      transactionalId: resultTransactionalId(target.groupId, target.topic, target.partition),
      transactionTimeoutMs: options.transactionTimeoutMs,
      maxSendBytes: options.maxTransactionBytes,
      subject: partitionSubject(target.topic, target.partition),
      access: [
        transactionalAccess(target),
        { operation: "READ", resourceType: "GROUP", names: [target.groupId] },
      ],
    });
    return new TransactionalPublisher(target, producer);
  }

  async publish(unit: PublishUnit): Promise<void> {
    await this.producer.run(
      {
        records: [...unit.outputs, ...unit.bookkeeping],
        offsets: {
          groupId: this.target.groupId,
          topic: this.target.topic,
          partition: this.target.partition,
          offset: unit.nextOffset,
        },
        ...(unit.sent ? { beforeCommit: async () => unit.sent?.() } : {}),
      },
      "committing a transaction",
    );
  }

  close(): Promise<void> {
    return this.producer.close();
  }
}

/**
 * At-least-once (`delivery.transactions=false`): a plain idempotent producer. Per unit: send the
 * outputs and wait for their acks, then the bookkeeping, then commit the consumer offset through the
 * group member (`commitOffsets`). The order makes every visible changelog entry or checkpoint imply
 * that its outputs are durable, so restoring dedup from the changelog never hides an unpublished
 * result. A crash between the sends and the offset commit republishes the uncommitted records
 * (duplicates, unless the changelog entry landed and dedup catches them). No fencing: a zombie can
 * publish until its group membership expires. Sends are bounded by a learned `SendBound` and a size
 * refusal is reported like `TransactionalProducer.run` reports it (`records` in the refused send,
 * `recordIndex` of its first record in outputs then bookkeeping), so the committer's one retry loop
 * (src/delivery/size-refusal.ts) treats both modes alike; records sent before the refusal are
 * published again by the retry (at least once).
 */
class AtLeastOncePublisher implements ResultPublisher {
  private constructor(
    private readonly target: PublisherTarget,
    private producer: Producer,
    private readonly commitOffset: (nextOffset: string) => Promise<void>,
    private readonly bound: SendBound,
  ) {}

  static async create(
    target: PublisherTarget,
    commitOffset: (nextOffset: string) => Promise<void>,
    maxSendBytes: number,
  ): Promise<AtLeastOncePublisher> {
    return new AtLeastOncePublisher(
      target,
      await AtLeastOncePublisher.connect(target),
      commitOffset,
      new SendBound(maxSendBytes),
    );
  }

  private static async connect(target: PublisherTarget): Promise<Producer> {
    // Idempotent: retries inside one producer session never duplicate or reorder a partition's records.
    const producer = target.kafka.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      // kafkajs's DefaultPartitioner without its per-message garbage (key-partitioner.ts).
      createPartitioner: keyPartitioner,
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
    // The send under way: its first record's index in outputs then bookkeeping, and how many it holds.
    let from = 0;
    let sending = 0;
    try {
      for (const records of [unit.outputs, unit.bookkeeping]) {
        for (const chunk of chunks(records, this.bound.bytes)) {
          sending = chunk.length;
          await this.producer.sendBatch({ topicMessages: toTopicMessages(chunk) });
          from += chunk.length;
        }
      }
      unit.sent?.();
    } catch (error) {
      if (isTooLarge(error)) {
        this.bound.refused(sending);
        // Same sequence problem as TransactionalProducer.renew: continue with a fresh producer id.
        await this.producer.disconnect().catch(() => undefined);
        this.producer = await AtLeastOncePublisher.connect(this.target);
        throw tooLarge(error, partitionSubject(this.target.topic, this.target.partition), {
          records: sending,
          recordIndex: from,
        });
      }
      const denied = kafkaFailure(error, {
        doing: `publishing results of ${this.target.topic}[${this.target.partition}]`,
        kafka: this.target.kafka,
        access: writeAccess([...unit.outputs, ...unit.bookkeeping]),
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

function publishFailed(error: unknown, target: PublisherTarget, doing: string): SluiceError {
  const message = error instanceof Error ? error.message : String(error);
  return new SluiceError(
    "PUBLISH_FAILED",
    `${doing} for ${target.topic}[${target.partition}] failed (at-least-once; the partition is reprocessed from its committed offset, so some results may be published twice): ${message}`,
    { retriable: true, cause: error, context: { topic: target.topic, partition: target.partition } },
  );
}

function transactionalAccess(target: PublisherTarget): KafkaAccess {
  return {
    operation: "WRITE",
    resourceType: "TRANSACTIONAL_ID",
    names: [resultTransactionalIdPrefix(target.groupId)],
    prefixed: true,
  };
}

/** What publishing at least once needs: WRITE on the records' topics. */
function writeAccess(messages: readonly OutboundMessage[]): KafkaAccess[] {
  return [{ operation: "WRITE", resourceType: "TOPIC", names: [...new Set(messages.map((m) => m.topic))] }];
}
