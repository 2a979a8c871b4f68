import type { Kafka, Producer } from "kafkajs";
import type { BatchResultRow, BatchSink, InFlightShard } from "../batch/batch-sink.js";
import type { Codec } from "../contracts/codec.js";
import type { InferenceResult } from "../contracts/inference.js";
import { ResultEncoder } from "../contracts/result-codec.js";
import { SluiceError } from "../sluice-error.js";
import { withAdmin } from "./admin-session.js";
import { kafkaFailure } from "./kafka-failure.js";
import { readKafkaRanges } from "./kafka-range-reader.js";

/** Transactional-id prefix of batch mode's shard producers (needs a PREFIXED WRITE ACL). */
export const BATCH_TRANSACTIONAL_ID_PREFIX = "sluice-batch-";

export const RUN_HEADER = "sluice-batch-run";
export const SHARD_HEADER = "sluice-batch-shard";

export interface KafkaTopicSinkOptions {
  kafka: Kafka;
  topic: string;
  /** Run id; transactional ids are `sluice-batch-<runId>-<shard>`. Set before the first shard. */
  runId?: string;
  /** Default "json". */
  codec?: Codec;
  /** A ready encoder for this topic (src/app/wire-codecs.ts; needed for avro-registry); default: built from codec. */
  encoder?: ResultEncoder;
  /** Records per send() inside a shard's transaction. Default 500. */
  sendChunkRecords?: number;
  /** Transaction timeout, ms (`delivery.transactionTimeoutMs`; a shard must be produced within it). */
  transactionTimeoutMs: number;
  /**
   * Runs inside each shard's transaction, after the last send and before the commit. A seam for tests
   * (src/app/batch-seams.ts: hold a transaction open to kill the producer in it); production sets none.
   */
  beforeCommit?: (shardKey: string) => Promise<void>;
}

/**
 * Publishes each shard as one Kafka transaction, keyed by request id. The transactional id is derived
 * from the run id and the shard, so a retry of the same shard fences the crashed producer and aborts its
 * open transaction (DESIGN.md §3). If a crash hit after the commit but before the manifest update,
 * `recoverInFlight` finds the committed records by their run/shard headers and the shard is not redone.
 * Results are `InferenceResult`s (the streaming contract); `timing.completedAt` is the publish time.
 */
export class KafkaTopicSink implements BatchSink {
  readonly uri: string;
  readonly format: string;
  runId: string | undefined;
  private readonly encoder: ResultEncoder;
  private producer: Producer | null = null;
  private currentKey: string | null = null;

  constructor(private readonly opts: KafkaTopicSinkOptions) {
    this.uri = `kafka:${opts.topic}`;
    this.format = `kafka-${opts.codec ?? "json"}`;
    this.runId = opts.runId;
    this.encoder = opts.encoder ?? new ResultEncoder({ codec: opts.codec ?? "json" });
  }

  async prepare(): Promise<void> {
    const exists = await withAdmin(this.opts.kafka, async (admin) =>
      (await admin.listTopics()).includes(this.opts.topic),
    );
    if (!exists) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `output topic ${this.opts.topic} does not exist, or this user may not DESCRIBE it (WRITE on it grants DESCRIBE; \`sluice acls --command batch\` lists what batch needs); create it first (sluice does not guess partitions or retention)`,
        { context: { topic: this.opts.topic } },
      );
    }
  }

  bindRun(runId: string): void {
    this.runId = runId;
  }

  async beginShard(key: string): Promise<InFlightShard> {
    if (!this.runId)
      throw new SluiceError("INTERNAL", "KafkaTopicSink.runId must be set before writing shards");
    const transactionalId = `${BATCH_TRANSACTIONAL_ID_PREFIX}${this.runId}-${key}`;
    await this.dropProducer();
    this.producer = this.newProducer(transactionalId);
    await this.producer.connect();
    this.currentKey = key;
    return { key, transactionalId, outputOffsets: await this.endOffsets() };
  }

  async writeShard(key: string, rows: readonly BatchResultRow[]): Promise<{ output: string; sha256: null }> {
    if (!this.producer || this.currentKey !== key) {
      throw new SluiceError("INTERNAL", `KafkaTopicSink.writeShard(${key}) without beginShard`);
    }
    const headers = { [RUN_HEADER]: this.runId!, [SHARD_HEADER]: key };
    const chunk = this.opts.sendChunkRecords ?? 500;
    const txn = await this.producer.transaction().catch(async (cause: unknown) => {
      await this.dropProducer();
      throw this.denied(cause, `starting the transaction of shard ${key}`) ?? cause;
    });
    try {
      for (let i = 0; i < rows.length; i += chunk) {
        const completedAt = Date.now();
        await txn.send({
          topic: this.opts.topic,
          messages: rows.slice(i, i + chunk).map((r) => {
            const encoded = this.encoder.encode(toResult(r, completedAt));
            return { key: r.id, value: encoded.value, headers: { ...encoded.headers, ...headers } };
          }),
        });
      }
      await this.opts.beforeCommit?.(key);
      await txn.commit();
    } catch (cause) {
      await txn.abort().catch(() => {});
      await this.dropProducer();
      const denied = this.denied(cause, `publishing shard ${key}`);
      if (denied) throw denied;
      throw new SluiceError(
        "TRANSACTION_FAILED",
        `publishing shard ${key} to ${this.opts.topic} failed; rerun the same command to retry it`,
        { cause, retriable: true, context: { topic: this.opts.topic } },
      );
    }
    await this.dropProducer();
    return { output: this.uri, sha256: null };
  }

  async recoverInFlight(shard: InFlightShard): Promise<{ committed: boolean; records: number }> {
    // A new producer with the same transactional id fences the old one; InitProducerId also waits for
    // an in-progress commit to finish and aborts an open transaction, so the log is settled afterwards.
    const producer = this.newProducer(shard.transactionalId);
    try {
      await producer.connect();
      const txn = await producer.transaction();
      await txn.abort();
    } catch (cause) {
      throw this.denied(cause, `fencing the producer of shard ${shard.key}`) ?? cause;
    } finally {
      await producer.disconnect().catch(() => {});
    }
    const end = await this.endOffsets();
    const ranges = shard.outputOffsets.map((o) => ({
      partition: o.partition,
      startOffset: o.offset,
      endOffset: end.find((e) => e.partition === o.partition)?.offset ?? o.offset,
    }));
    const runId = this.runId;
    let records = 0;
    for await (const { message } of readKafkaRanges({
      kafka: this.opts.kafka,
      topic: this.opts.topic,
      ranges,
    })) {
      const h = message.headers ?? {};
      if (String(h[RUN_HEADER] ?? "") === runId && String(h[SHARD_HEADER] ?? "") === shard.key) records++;
    }
    return { committed: records > 0, records };
  }

  async close(): Promise<void> {
    await this.dropProducer();
  }

  /** A security failure of the shard producer, naming the topic and transactional-id prefix it needs. */
  private denied(cause: unknown, doing: string): SluiceError | undefined {
    return kafkaFailure(cause, {
      doing,
      kafka: this.opts.kafka,
      access: [
        { operation: "WRITE", resourceType: "TOPIC", names: [this.opts.topic] },
        {
          operation: "WRITE",
          resourceType: "TRANSACTIONAL_ID",
          names: [BATCH_TRANSACTIONAL_ID_PREFIX],
          prefixed: true,
        },
      ],
    });
  }

  private newProducer(transactionalId: string): Producer {
    return this.opts.kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      transactionTimeout: this.opts.transactionTimeoutMs,
      allowAutoTopicCreation: false,
    });
  }

  private async dropProducer(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    this.currentKey = null;
    await p?.disconnect().catch(() => {});
  }

  private async endOffsets(): Promise<{ partition: number; offset: string }[]> {
    return withAdmin(this.opts.kafka, async (admin) => {
      const offsets = await admin.fetchTopicOffsets(this.opts.topic);
      return offsets
        .map((o) => ({ partition: o.partition, offset: o.high }))
        .sort((a, b) => a.partition - b.partition);
    });
  }
}

function toResult(r: BatchResultRow, completedAt: number): InferenceResult {
  return {
    id: r.id,
    status: "ok",
    output: r.output,
    model: r.model,
    // File inputs have no topic position: partition -1 and the row number as offset.
    source: r.source ?? { topic: "", partition: -1, offset: String(r.row) },
    timing: { requestTimestamp: 0, queueMs: 0, inferenceMs: 0, batchSize: 0, completedAt },
    attributes: r.attributes,
    truncated: r.truncated,
    error: null,
  };
}
