// First: kafkajs must find the linear message grouping when it loads (message-grouping.ts).
import "../protocol/message-grouping.js";
import { type Kafka, Partitioners } from "kafkajs";
import type { BackfillRecord, RunWriter } from "../../backfill/backfill-submission.js";
import {
  encodeRunManifest,
  type InvalidRow,
  type PlacedRecords,
  type RunManifest,
} from "../../backfill/run-manifest.js";
import { SluiceError } from "../../sluice-error.js";
import { withAdmin } from "../client/admin-session.js";
import { type Send, TransactionalProducer } from "../write/transactional-producer.js";
import { BACKFILL_TRANSACTIONAL_ID_PREFIX, type RunManifestStore } from "./run-manifest-store.js";

export interface KafkaRunWriterOptions {
  kafka: Kafka;
  runId: string;
  /** The backfill topic rows go to (the first of `topics.backfill`). */
  backfillTopic: string;
  store: RunManifestStore;
  /** `delivery.transactionTimeoutMs`. */
  transactionTimeoutMs: number;
  /** `delivery.maxTransactionBytes`: bounds each send of a chunk's transaction. */
  maxTransactionBytes: number;
}

/**
 * The Kafka side of `sluice backfill submit`, on the one transactional write path
 * (transactional-producer.ts): one transactional producer per run (`sluice-backfill-submit-<runId>`),
 * so a second submitter of the same run fences the first and aborts its open transaction (docs/design.md §3). Each chunk is one transaction holding its rows (keyed by
 * id, partitioned like every Kafka producer: murmur2 of the key) and the run's manifest on the runs
 * topic. Rows are partitioned here, not by kafkajs, so the manifest can record exactly which offsets
 * of each partition hold the run.
 */
export class KafkaRunWriter implements RunWriter {
  private producer: TransactionalProducer | null = null;
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
    // Opening runs InitProducerId: it fences an earlier submitter of this run and waits until that
    // one's open transaction is aborted, so the manifest read next is final.
    this.producer = await TransactionalProducer.open({
      kafka: this.opts.kafka,
      transactionalId: `${BACKFILL_TRANSACTIONAL_ID_PREFIX}${this.opts.runId}`,
      transactionTimeoutMs: this.opts.transactionTimeoutMs,
      maxSendBytes: this.opts.maxTransactionBytes,
      subject: {
        name: `run ${this.opts.runId} to ${this.opts.backfillTopic}`,
        context: { topic: this.opts.backfillTopic, runId: this.opts.runId },
        retry: "nothing of that chunk is visible: run the same command again to resume",
        fenced:
          "another `sluice backfill submit` of this run took over; let it finish (or stop it and run the same command again)",
      },
      access: [
        {
          operation: "WRITE",
          resourceType: "TRANSACTIONAL_ID",
          names: [BACKFILL_TRANSACTIONAL_ID_PREFIX],
          prefixed: true,
        },
      ],
    });
    return this.opts.store.latest(this.opts.runId);
  }

  async commitChunk(
    records: readonly BackfillRecord[],
    next: (placed: PlacedRecords[], refused: InvalidRow[]) => RunManifest,
  ): Promise<RunManifest> {
    const producer = this.producer;
    if (!producer) throw new SluiceError("INTERNAL", "KafkaRunWriter.commitChunk before open()");
    const refused: InvalidRow[] = [];
    let manifest: RunManifest | undefined;
    await producer.runLeavingOutTooLarge(
      {
        records: records.map((r) => ({
          topic: this.opts.backfillTopic,
          partition: this.partitionOf(r.id),
          key: r.id,
          value: r.value,
          headers: r.headers,
        })),
        closingRecords: (sends) => {
          manifest = next(placedRows(sends, this.opts.backfillTopic), refused);
          return [{ topic: this.opts.store.topic, key: this.opts.runId, value: encodeRunManifest(manifest) }];
        },
      },
      `submitting a chunk of ${records.length} rows`,
      // A row the broker refuses even alone is an invalid row of the run, not a retry loop.
      (index) => refused.push(tooLargeRow(records[index] as BackfillRecord, this.opts.backfillTopic)),
    );
    return manifest as RunManifest;
  }

  async close(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    await p?.close();
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

/** Where each send put the run's rows: per partition, the base offset and how many records follow it. */
function placedRows(sends: readonly Send[], topic: string): PlacedRecords[] {
  const placed: PlacedRecords[] = [];
  for (const send of sends) {
    const counts = new Map<number, number>();
    for (const m of send.records) {
      if (m.topic === topic && m.partition !== undefined)
        counts.set(m.partition, (counts.get(m.partition) ?? 0) + 1);
    }
    for (const r of send.metadata) {
      const count = counts.get(r.partition) ?? 0;
      if (r.topicName === topic && count > 0 && r.baseOffset !== undefined) {
        placed.push({ partition: r.partition, baseOffset: r.baseOffset, count });
      }
    }
  }
  return placed;
}

function tooLargeRow(record: BackfillRecord, topic: string): InvalidRow {
  return {
    row: record.row,
    code: "PUBLISH_TOO_LARGE",
    message: `row ${record.row} (${record.value.length} bytes as a request) is refused by the broker as too large for ${topic} even alone; raise the topic's max.message.bytes or lower delivery.maxMessageBytes to reject such rows earlier`,
  };
}
