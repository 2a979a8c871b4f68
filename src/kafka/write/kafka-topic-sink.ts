import type { Kafka } from "kafkajs";
import type {
  BatchResultRow,
  BatchSink,
  FailureRecord,
  InFlightShard,
  ShardWriteHooks,
} from "../../batch/batch-sink.js";
import type { Codec } from "../../contracts/codec.js";
import type { InferenceResult } from "../../contracts/inference.js";
import { ResultEncoder } from "../../contracts/result-codec.js";
import type { OutboundMessage } from "../../delivery/outbound-message.js";
import { SluiceError } from "../../sluice-error.js";
import { withAdmin } from "../client/admin-session.js";
import type { KafkaAccess } from "../client/kafka-failure.js";
import { readKafkaRanges } from "../read/kafka-range-reader.js";
import type { FailureSubject } from "./produce-failure.js";
import { TransactionalProducer } from "./transactional-producer.js";

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
  /** Transaction timeout, ms (`delivery.transactionTimeoutMs`; a shard must be produced within it). */
  transactionTimeoutMs: number;
  /** Most estimated bytes per send inside a shard's transaction (`delivery.maxTransactionBytes`). */
  maxTransactionBytes: number;
  /**
   * Runs inside each shard's transaction, after the last send and before the commit. A seam for tests
   * (src/app/batch-seams.ts: hold a transaction open to kill the producer in it); production sets none.
   */
  beforeCommit?: (shardKey: string) => Promise<void>;
}

/**
 * Publishes each shard as one Kafka transaction, keyed by request id, through the one transactional
 * write path (transactional-producer.ts: byte-bounded sends, fencing, classification). The
 * transactional id is derived from the run id and the shard, so a retry of the same shard fences the
 * crashed producer and aborts its open transaction (docs/design.md §3). A result the broker refuses as too
 * large even alone is left out and handed to `hooks.beforeCommit` before the shard commits (the job
 * records it as a failed row with its reason); the shard commits without it instead of failing on
 * every rerun. If a crash hit after the commit but before the manifest update,
 * `recoverInFlight` finds the committed records by their run/shard headers and the shard is not redone.
 * Results are `InferenceResult`s (the streaming contract); `timing.completedAt` is the publish time.
 */
export class KafkaTopicSink implements BatchSink {
  readonly uri: string;
  readonly format: string;
  runId: string | undefined;
  private readonly encoder: ResultEncoder;
  private producer: TransactionalProducer | null = null;
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
    await this.dropProducer();
    const transactionalId = this.transactionalId(key);
    // Opening initialises the transactional id: a crashed earlier attempt at this shard is fenced and
    // its open transaction aborted before the end offsets are read.
    this.producer = await this.openProducer(key);
    this.currentKey = key;
    return { key, transactionalId, outputOffsets: await this.endOffsets() };
  }

  async writeShard(
    key: string,
    rows: readonly BatchResultRow[],
    hooks?: ShardWriteHooks,
  ): Promise<{ output: string; sha256: null }> {
    const producer = this.producer;
    if (!producer || this.currentKey !== key) {
      throw new SluiceError("INTERNAL", `KafkaTopicSink.writeShard(${key}) without beginShard`);
    }
    const headers = { [RUN_HEADER]: this.runId as string, [SHARD_HEADER]: key };
    const completedAt = Date.now();
    const records = rows.map((r): OutboundMessage => {
      const encoded = this.encoder.encode(toResult(r, completedAt));
      return {
        topic: this.opts.topic,
        key: r.id,
        value: encoded.value,
        headers: { ...encoded.headers, ...headers },
      };
    });
    const rejected: FailureRecord[] = [];
    try {
      await producer.runLeavingOutTooLarge(
        {
          records,
          beforeCommit: async () => {
            await hooks?.beforeCommit(rejected);
            await this.opts.beforeCommit?.(key);
          },
        },
        "publishing",
        (index) =>
          rejected.push(
            tooLargeRow(rows[index] as BatchResultRow, records[index] as OutboundMessage, this.opts.topic),
          ),
      );
    } catch (error) {
      await this.dropProducer();
      throw error;
    }
    await this.dropProducer();
    return { output: this.uri, sha256: null };
  }

  async recoverInFlight(shard: InFlightShard): Promise<{ committed: boolean; records: number }> {
    // A new producer with the same transactional id fences the old one; InitProducerId also waits for
    // an in-progress commit to finish and aborts an open transaction, so the log is settled afterwards.
    await (await this.openProducer(shard.key, shard.transactionalId)).close();
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

  private transactionalId(key: string): string {
    if (!this.runId)
      throw new SluiceError("INTERNAL", "KafkaTopicSink.runId must be set before writing shards");
    return `${BATCH_TRANSACTIONAL_ID_PREFIX}${this.runId}-${key}`;
  }

  private openProducer(
    key: string,
    transactionalId = this.transactionalId(key),
  ): Promise<TransactionalProducer> {
    return TransactionalProducer.open({
      kafka: this.opts.kafka,
      transactionalId,
      transactionTimeoutMs: this.opts.transactionTimeoutMs,
      maxSendBytes: this.opts.maxTransactionBytes,
      subject: shardSubject(key, this.runId as string, this.opts.topic),
      access: [SHARD_ACCESS],
    });
  }

  private async dropProducer(): Promise<void> {
    const p = this.producer;
    this.producer = null;
    this.currentKey = null;
    await p?.close();
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

/** What a shard producer needs besides WRITE on the output topic (named in an AUTHORIZATION_FAILED). */
const SHARD_ACCESS: KafkaAccess = {
  operation: "WRITE",
  resourceType: "TRANSACTIONAL_ID",
  names: [BATCH_TRANSACTIONAL_ID_PREFIX],
  prefixed: true,
};

function shardSubject(key: string, runId: string, topic: string): FailureSubject {
  return {
    name: `shard ${key} of run ${runId} to ${topic}`,
    context: { topic, shard: key, runId },
    retry: "nothing of the shard is visible: rerun the same command to retry it",
    fenced: "another process writes this run now: let it finish, or stop it and rerun the same command",
  };
}

function tooLargeRow(row: BatchResultRow, record: OutboundMessage, topic: string): FailureRecord {
  const bytes = (record.value as Buffer).length;
  return {
    id: row.id,
    row: row.row,
    code: "PUBLISH_TOO_LARGE",
    message: `the broker refused this row's result (${bytes} bytes) as too large for ${topic} even alone; raise the topic's max.message.bytes to publish it`,
  };
}
