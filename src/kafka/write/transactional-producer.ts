import type { Kafka, Producer, RecordMetadata } from "kafkajs";
import type { OutboundMessage } from "../../delivery/outbound-message.js";
import { type RefusedSend, retrySizeRefusals, SendBound } from "../../delivery/size-refusal.js";
import type { SluiceError } from "../../sluice-error.js";
import { type KafkaAccess, kafkaFailure, narrowTopicDenial } from "../client/kafka-failure.js";
import { keyPartitioner } from "../protocol/key-partitioner.js";
import { classifyProduceFailure, type FailureSubject } from "./produce-failure.js";
import { chunks, toTopicMessages } from "./record-collector.js";

/**
 * The one transactional write path of Sluice (Kafka Streams' `StreamsProducer` with its
 * `RecordCollector`): the result publisher of every input partition, batch mode's topic sink (a
 * transaction per shard) and `sluice backfill submit` (a transaction per chunk) all write through it.
 * It owns:
 * - the producer's lifecycle and the fencing init: `open()` initialises the transactional id, which
 *   fences any earlier holder and aborts (or waits for) the transaction it left open (docs/design.md §3);
 * - byte-bounded sends (record-collector.ts), at most its learned `SendBound` each
 *   (src/delivery/size-refusal.ts: halved after a refused send of several records);
 * - classification (produce-failure.ts) and the naming of access failures (kafka-failure.ts);
 * - recovery from a size refusal: the producer is renewed (see `renew`), so the next attempt can run.
 *
 * A failed `run` has aborted its transaction; nothing of it is visible to read_committed readers.
 * After PUBLISH_TOO_LARGE (context: `records` in the refused send, `recordIndex` of its first record
 * in the unit) the producer stays usable, and what follows is size-refusal.ts's one retry loop
 * (`runLeavingOutTooLarge` here, the partition committer for results); after PRODUCER_FENCED it must
 * not be used again; after other failures the caller decides (all callers today drop it).
 */
export interface TransactionalProducerOptions {
  kafka: Kafka;
  transactionalId: string;
  /** Broker-side transaction timeout, ms (`delivery.transactionTimeoutMs`). */
  transactionTimeoutMs: number;
  /** Most estimated bytes per send (`delivery.maxTransactionBytes`); never above MAX_SEND_BYTES. */
  maxSendBytes: number;
  /** What the writes are for, in messages (produce-failure.ts). */
  subject: FailureSubject;
  /**
   * The accesses besides WRITE on the records' topics that writing needs (the transactional id, the
   * consumer group for offsets), named in an AUTHORIZATION_FAILED.
   */
  access: readonly KafkaAccess[];
}

/** One transaction: records, optionally the consumer offset committed with them, and a seam. */
export interface TransactionUnit {
  records: readonly OutboundMessage[];
  /** Committed with the records (`sendOffsets`): `offset` is the next offset to read. */
  offsets?: { groupId: string; topic: string; partition: number; offset: string };
  /**
   * Records decided by where the others landed, sent last (the backfill run manifest records the
   * offsets of its rows); called once, after every send of `records` succeeded.
   */
  closingRecords?: (sends: readonly Send[]) => readonly OutboundMessage[];
  /** Runs after the last send, before the commit (tests hold a transaction open here). */
  beforeCommit?: () => Promise<void>;
}

/** One send of a transaction: its records and what the broker answered (partition, base offset). */
export interface Send {
  records: readonly OutboundMessage[];
  metadata: RecordMetadata[];
}

export class TransactionalProducer {
  private readonly bound: SendBound;

  private constructor(
    private readonly opts: TransactionalProducerOptions,
    private producer: Producer,
  ) {
    this.bound = new SendBound(opts.maxSendBytes);
  }

  /** Connects and initialises the transactional id (fencing every earlier holder of it). */
  static async open(opts: TransactionalProducerOptions): Promise<TransactionalProducer> {
    return new TransactionalProducer(opts, await TransactionalProducer.connect(opts));
  }

  /** The current send bound, bytes (halved after a refused multi-record send). */
  get maxSendBytes(): number {
    return this.bound.bytes;
  }

  private static async connect(opts: TransactionalProducerOptions): Promise<Producer> {
    const producer = opts.kafka.producer({
      transactionalId: opts.transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: opts.transactionTimeoutMs,
      allowAutoTopicCreation: false,
      // kafkajs's DefaultPartitioner without its per-message garbage (key-partitioner.ts).
      createPartitioner: keyPartitioner,
    });
    try {
      await producer.connect();
      // kafkajs initialises the transactional id lazily on the first transaction(); do it now so the
      // previous holder is fenced and its open transaction settled before the caller reads anything.
      const txn = await producer.transaction();
      await txn.abort(); // nothing was added: a local state change, no EndTxn request
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      const doing = `initialising the transactional producer of ${opts.subject.name}`;
      throw (
        kafkaFailure(error, { doing, kafka: opts.kafka, access: opts.access }) ??
        classifyProduceFailure(error, opts.subject, doing)
      );
    }
    return producer;
  }

  /**
   * Writes one unit in one transaction and commits it; returns its sends with what the broker
   * answered (partitions and base offsets). Throws a classified SluiceError after aborting.
   */
  async run(unit: TransactionUnit, doing: string): Promise<Send[]> {
    const sends: Send[] = [];
    let txn: Awaited<ReturnType<Producer["transaction"]>> | undefined;
    // The send under way: its first record's index in unit.records, and how many it holds.
    let from = 0;
    let sending = 0;
    try {
      const open = await this.producer.transaction();
      txn = open;
      const send = async (records: readonly OutboundMessage[]) => {
        for (const chunk of chunks(records, this.bound.bytes)) {
          sending = chunk.length;
          sends.push({
            records: chunk,
            metadata: await open.sendBatch({ topicMessages: toTopicMessages(chunk) }),
          });
          from += chunk.length;
        }
      };
      await send(unit.records);
      if (unit.closingRecords) await send(unit.closingRecords(sends));
      sending = 0;
      if (unit.offsets) {
        const { groupId, topic, partition, offset } = unit.offsets;
        await open.sendOffsets({
          consumerGroupId: groupId,
          topics: [{ topic, partitions: [{ partition, offset }] }],
        });
      }
      await unit.beforeCommit?.();
      await open.commit();
      return sends;
    } catch (error) {
      const failure = await this.classify(error, unit, doing, { records: sending, recordIndex: from });
      if (txn && failure.code !== "PRODUCER_FENCED") await txn.abort().catch(() => undefined);
      if (failure.code === "PUBLISH_TOO_LARGE") {
        this.bound.refused(sending);
        await this.renew();
      }
      throw failure;
    }
  }

  /**
   * `run` for writers whose records are rows a user can be told about (batch shards, backfill
   * chunks), through size-refusal.ts's one retry loop: after a refused send of several records it
   * runs again with the halved bound, and a record the broker refuses alone is left out (`onRefused`
   * gets its index in `unit.records`, before the next attempt) instead of failing the unit on every
   * retry. A refused closing record, and every other failure, is thrown.
   */
  runLeavingOutTooLarge(
    unit: TransactionUnit,
    doing: string,
    onRefused: (index: number) => void,
  ): Promise<Send[]> {
    return retrySizeRefusals({
      parts: unit.records,
      recordsOf: () => 1,
      write: (records) => this.run({ ...unit, records }, doing),
      onRefused: (_, index) => {
        onRefused(index);
        return undefined;
      },
    });
  }

  async close(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
  }

  private async classify(
    error: unknown,
    unit: TransactionUnit,
    doing: string,
    send: RefusedSend,
  ): Promise<SluiceError> {
    const topics = [...new Set(unit.records.map((r) => r.topic))];
    const denied = kafkaFailure(error, {
      doing: `${doing} of ${this.opts.subject.name}`,
      kafka: this.opts.kafka,
      access: [{ operation: "WRITE", resourceType: "TOPIC", names: topics }, ...this.opts.access],
    });
    if (denied) return narrowTopicDenial(denied, this.opts.kafka);
    return classifyProduceFailure(error, this.opts.subject, doing, send);
  }

  /**
   * After a refused produce request the producer's sequence numbers are wrong: kafkajs rolls back the
   * sequence of every partition in the request, also of those the broker accepted, and the next send
   * fails with OUT_OF_ORDER_SEQUENCE_NUMBER. A fresh producer with the same transactional id starts a
   * new epoch with clean sequences (and fences only the old producer, which is ours).
   */
  private async renew(): Promise<void> {
    await this.producer.disconnect().catch(() => undefined);
    this.producer = await TransactionalProducer.connect(this.opts);
  }
}
