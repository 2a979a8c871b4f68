import { type Kafka, Partitioners, type Producer } from "kafkajs";
import type { BackfillRecord, RunWriter } from "../backfill/backfill-submission.js";
import { encodeRunManifest, type PlacedRecords, type RunManifest } from "../backfill/run-manifest.js";
import { SluiceError } from "../sluice-error.js";
import { withAdmin } from "./admin-session.js";
import { kafkaFailure } from "./kafka-failure.js";
import { MAX_SEND_BYTES } from "./result-publisher.js";
import { BACKFILL_TRANSACTIONAL_ID_PREFIX, type RunManifestStore } from "./run-manifest-store.js";

export interface KafkaRunWriterOptions {
  kafka: Kafka;
  runId: string;
  /** The backfill topic rows go to (the first of `topics.backfill`). */
  backfillTopic: string;
  store: RunManifestStore;
  transactionTimeoutMs: number;
}

/**
 * The Kafka side of `sluice backfill submit`: one transactional producer per run
 * (`sluice-backfill-submit-<runId>`), so a second submitter of the same run fences the first and
 * aborts its open transaction (DESIGN.md §3). Each chunk is one transaction holding its rows (keyed by
 * id, partitioned like every Kafka producer: murmur2 of the key) and the run's manifest on the runs
 * topic. Rows are partitioned here, not by kafkajs, so the manifest can record exactly which offsets
 * of each partition hold the run.
 */
export class KafkaRunWriter implements RunWriter {
  private producer: Producer | null = null;
  private partitions = 0;
  private readonly partitioner = Partitioners.DefaultPartitioner();

  constructor(private readonly opts: KafkaRunWriterOptions) {}

  async open(): Promise<RunManifest | null> {
    this.partitions = await withAdmin(this.opts.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(this.opts.backfillTopic)) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `backfill topic ${this.opts.backfillTopic} (topics.backfill) does not exist; start sluice serve with it configured (serve creates it) or create it`,
          { context: { topic: this.opts.backfillTopic } },
        );
      }
      const meta = await admin.fetchTopicMetadata({ topics: [this.opts.backfillTopic] });
      return meta.topics[0]?.partitions.length ?? 0;
    });
    await this.opts.store.ensureTopic();
    const producer = this.opts.kafka.producer({
      transactionalId: `${BACKFILL_TRANSACTIONAL_ID_PREFIX}${this.opts.runId}`,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: this.opts.transactionTimeoutMs,
      allowAutoTopicCreation: false,
    });
    this.producer = producer;
    try {
      await producer.connect();
      // The first transaction runs InitProducerId: it fences an earlier submitter of this run and
      // waits until that one's open transaction is aborted, so the manifest read next is final.
      const fence = await producer.transaction();
      await fence.abort();
    } catch (cause) {
      throw this.denied(cause, "starting the run's transactional submitter") ?? cause;
    }
    return this.opts.store.latest(this.opts.runId);
  }

  async commitChunk(
    records: readonly BackfillRecord[],
    next: (placed: PlacedRecords[]) => RunManifest,
  ): Promise<RunManifest> {
    const producer = this.producer;
    if (!producer) throw new SluiceError("INTERNAL", "KafkaRunWriter.commitChunk before open()");
    const txn = await producer.transaction();
    try {
      const placed: PlacedRecords[] = [];
      let batch: { partition: number; key: string; value: Buffer; headers: Record<string, string> }[] = [];
      let bytes = 0;
      const flush = async () => {
        if (batch.length === 0) return;
        const counts = new Map<number, number>();
        for (const m of batch) counts.set(m.partition, (counts.get(m.partition) ?? 0) + 1);
        const metadata = await txn.send({ topic: this.opts.backfillTopic, messages: batch });
        for (const r of metadata) {
          const count = counts.get(r.partition) ?? 0;
          if (count > 0 && r.baseOffset !== undefined) {
            placed.push({ partition: r.partition, baseOffset: r.baseOffset, count });
          }
        }
        batch = [];
        bytes = 0;
      };
      for (const r of records) {
        const size = r.value.length + Buffer.byteLength(r.id) + 128;
        if (bytes + size > MAX_SEND_BYTES) await flush();
        batch.push({ partition: this.partitionOf(r.id), key: r.id, value: r.value, headers: r.headers });
        bytes += size;
      }
      await flush();
      const manifest = next(placed);
      await txn.send({
        topic: this.opts.store.topic,
        messages: [{ key: this.opts.runId, value: encodeRunManifest(manifest) }],
      });
      await txn.commit();
      return manifest;
    } catch (cause) {
      await txn.abort().catch(() => {});
      const denied = this.denied(cause, `submitting a chunk of run ${this.opts.runId}`);
      if (denied) throw denied;
      throw new SluiceError(
        "TRANSACTION_FAILED",
        `submitting a chunk of run ${this.opts.runId} to ${this.opts.backfillTopic} failed (${(cause as Error).message}); nothing of that chunk is visible: run the same command again to resume`,
        { cause, retriable: true, context: { topic: this.opts.backfillTopic } },
      );
    }
  }

  /** A security failure of the submitter, naming the topics and the transactional-id prefix it needs. */
  private denied(cause: unknown, doing: string): SluiceError | undefined {
    return kafkaFailure(cause, {
      doing,
      kafka: this.opts.kafka,
      access: [
        {
          operation: "WRITE",
          resourceType: "TOPIC",
          names: [this.opts.backfillTopic, this.opts.store.topic],
        },
        {
          operation: "WRITE",
          resourceType: "TRANSACTIONAL_ID",
          names: [BACKFILL_TRANSACTIONAL_ID_PREFIX],
          prefixed: true,
        },
      ],
    });
  }

  async close(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    await p?.disconnect().catch(() => {});
  }

  private partitionOf(key: string): number {
    const partitionMetadata = Array.from({ length: this.partitions }, (_, i) => ({
      partitionId: i,
      leader: 0,
      replicas: [0],
      isr: [0],
      partitionErrorCode: 0,
    }));
    return this.partitioner({
      topic: this.opts.backfillTopic,
      partitionMetadata,
      message: { key, value: null },
    });
  }
}
