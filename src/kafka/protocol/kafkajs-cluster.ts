import type { Kafka, KafkaMessage } from "kafkajs";
import { SluiceError } from "../../sluice-error.js";
import { kafkajsModule } from "./kafkajs-module.js";

/**
 * kafkajs's own Cluster object, for reads that need no consumer group: what the Java client's
 * `assign()` does, which kafkajs has no public API for (tulios/kafkajs#373). The Cluster is the one
 * kafkajs builds for its consumers, producers and admins (`src/cluster/index.js`): the same brokers,
 * TLS, SASL, timeouts, retry policy and logger as the `Kafka` instance, with its metadata cache and
 * its connection pool. It is reached through the `Kafka` instance's private factory (kafkajs 2.2.4,
 * `src/index.js`: `this[PRIVATE.CREATE_CLUSTER]`, a symbol described `private:Kafka:createCluster`);
 * a kafkajs without it fails loudly here instead of reading wrong.
 */

/** One partition of a fetch response, as kafkajs decodes it (read_committed: LSO, aborted list). */
export interface FetchedPartitionData {
  partition: number;
  errorCode: number;
  highWatermark: string;
  lastStableOffset?: string;
  abortedTransactions?: unknown[];
  messages: KafkaMessage[];
}

export interface FetchRequest {
  isolationLevel: number;
  maxWaitTime: number;
  minBytes: number;
  maxBytes: number;
  topics: { topic: string; partitions: { partition: number; fetchOffset: string; maxBytes: number }[] }[];
}

/** The parts of kafkajs's Broker that Sluice's own fetches use. */
export interface KafkajsBroker {
  fetch(request: FetchRequest): Promise<{
    responses: { topicName: string; partitions: FetchedPartitionData[] }[];
  }>;
}

/** The parts of kafkajs's Cluster that Sluice's own fetches use. */
export interface KafkajsCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  refreshMetadata(): Promise<void>;
  addMultipleTargetTopics(topics: string[]): Promise<void>;
  /** Leader node id → the given partitions it leads (partitions without metadata are left out). */
  findLeaderForPartitions(topic: string, partitions: number[]): Record<string, number[]>;
  findBroker(node: { nodeId: string }): Promise<KafkajsBroker>;
  fetchTopicsOffset(
    topics: { topic: string; fromBeginning: boolean; partitions: { partition: number }[] }[],
  ): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
}

/** kafkajs's batch filter (`src/consumer/batch.js`): the records a read_committed consumer gets. */
export interface KafkajsBatch {
  /** Data records at or after the fetched offset: no control records, no aborted records. */
  messages: KafkaMessage[];
}

type CreateCluster = (options: {
  allowAutoTopicCreation: boolean;
  isolationLevel: number;
  metadataMaxAge?: number;
}) => KafkajsCluster;

/** kafkajs's `ISOLATION_LEVEL.READ_COMMITTED` (`src/protocol/isolationLevel.js`). */
export const READ_COMMITTED = 1;

/** A new, unconnected Cluster of `kafka` (connect it; disconnect it when done). */
export function kafkajsCluster(kafka: Kafka): KafkajsCluster {
  const own = kafka as unknown as Record<symbol, unknown>;
  const key = Object.getOwnPropertySymbols(own).find((s) => s.description === "private:Kafka:createCluster");
  const create = key === undefined ? undefined : own[key];
  if (typeof create !== "function") {
    throw new SluiceError(
      "INTERNAL",
      "This kafkajs has no private cluster factory (`private:Kafka:createCluster`): Sluice's group-less " +
        "reads need kafkajs 2.2.x; install the kafkajs version in package-lock.json",
    );
  }
  return (create as CreateCluster)({ allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED });
}

type BatchClass = new (
  topic: string,
  fetchedOffset: string,
  partitionData: FetchedPartitionData,
) => KafkajsBatch;
let Batch: BatchClass | undefined;

/**
 * The records of one fetched partition that a read_committed consumer gets, by kafkajs's own batch
 * filter (with Sluice's correction of its aborted-transaction order, aborted-transaction-order.ts,
 * applied to the decoder it reads from).
 */
export function committedRecords(
  topic: string,
  fetchedOffset: string,
  data: FetchedPartitionData,
): KafkaMessage[] {
  Batch ??= kafkajsModule<BatchClass>("consumer", "batch.js");
  return new Batch(topic, fetchedOffset, data).messages;
}
