import type { Kafka } from "kafkajs";
import type { RequestDecoder } from "../../contracts/request-codec.js";
import { type PartitionRange, parseOffsetSpec, resolveRanges } from "../../runs/offset-spec.js";
import type { RowSource, SourceRow } from "../../runs/row-source.js";
import type { InputDescription } from "../../runs/run-provenance.js";
import { SluiceError } from "../../sluice-error.js";
import { withAdmin } from "../client/admin-session.js";
import { readKafkaRanges } from "./kafka-range-reader.js";

export interface KafkaRangeSourceOptions {
  kafka: Kafka;
  topic: string;
  /** `--from`: earliest (default), partition:offset pairs or an ISO timestamp. */
  from?: string | null;
  /** `--to`: latest at start (default), partition:offset pairs or an ISO timestamp. Exclusive. */
  to?: string | null;
  /**
   * The request decoder, built by the caller from the configuration (`topics.requestCodec`,
   * `delivery.maxMessageBytes`; src/app/wire-codecs.ts for avro-registry).
   */
  decoder: RequestDecoder;
  /** Records read ahead of the job. Default 5000. */
  maxBufferedRecords?: number;
}

/**
 * A topic range as batch input (`kafka:TOPIC`). End offsets are fixed when the run first starts and
 * kept in the manifest, so a resumed run reads exactly the same records; `read_committed` means
 * aborted transactional records never become rows.
 */
export class KafkaRangeSource implements RowSource {
  private ranges: PartitionRange[] | null = null;
  private readonly decoder: RequestDecoder;

  constructor(private readonly opts: KafkaRangeSourceOptions) {
    parseOffsetSpec(opts.from, "--from");
    parseOffsetSpec(opts.to, "--to");
    this.decoder = opts.decoder;
  }

  async describe(previous?: InputDescription): Promise<InputDescription> {
    const spec = { from: this.opts.from ?? null, to: this.opts.to ?? null };
    const uri = `kafka:${this.opts.topic}`;
    if (
      previous?.kind === "kafka" &&
      previous.uri === uri &&
      previous.spec.from === spec.from &&
      previous.spec.to === spec.to
    ) {
      this.ranges = previous.ranges;
      return { ...previous };
    }
    this.ranges = await withAdmin(this.opts.kafka, async (admin) => {
      let offsets: { partition: number; low: string; high: string }[];
      try {
        offsets = await admin.fetchTopicOffsets(this.opts.topic);
      } catch (cause) {
        throw new SluiceError(
          "INPUT_INVALID",
          `cannot read offsets of topic ${this.opts.topic}: ${(cause as Error).message}; check the topic name`,
          { cause, context: { topic: this.opts.topic } },
        );
      }
      const byTimestamp = async (ms: number) => {
        const res = await admin.fetchTopicOffsetsByTimestamp(this.opts.topic, ms);
        return new Map(res.map((r) => [r.partition, BigInt(r.offset)]));
      };
      return resolveRanges(
        offsets,
        parseOffsetSpec(this.opts.from, "--from"),
        parseOffsetSpec(this.opts.to, "--to"),
        byTimestamp,
      );
    });
    return { kind: "kafka", uri, topic: this.opts.topic, ranges: this.ranges, spec, rows: null };
  }

  async *items(): AsyncGenerator<SourceRow> {
    if (!this.ranges) throw new SluiceError("INTERNAL", "KafkaRangeSource.items() called before describe()");
    await this.assertRangesAvailable(this.ranges);
    let row = 0;
    for await (const { partition, message } of readKafkaRanges({
      kafka: this.opts.kafka,
      topic: this.opts.topic,
      ranges: this.ranges,
      maxBufferedRecords: this.opts.maxBufferedRecords,
    })) {
      const source = {
        topic: this.opts.topic,
        partition,
        offset: message.offset,
        timestampMs: Number(message.timestamp),
      };
      // A registry schema id not seen yet is looked up first; if the registry cannot answer, the run
      // stops with REGISTRY_UNAVAILABLE (retriable: rerunning resumes from the manifest).
      const missing = this.decoder.schemaIdsToLoad([message]);
      if (missing.length > 0) await this.decoder.loadSchemas(missing);
      const decoded = this.decoder.decode(message.value, message.headers, message.key);
      if (decoded.ok) {
        yield {
          row,
          id: decoded.request.id,
          text: decoded.request.text,
          attributes: decoded.request.attributes ?? null,
          source,
        };
      } else {
        yield {
          row,
          id: `#${this.opts.topic}/${partition}/${message.offset}`,
          text: null,
          attributes: null,
          source,
          error: { code: decoded.code, message: decoded.message },
        };
      }
      row++;
    }
  }

  /**
   * Retention may have deleted the start of a stored range since the run began: rows would shift and shards
   * would no longer mean the same rows, so refuse instead of silently scoring a different input.
   */
  private async assertRangesAvailable(ranges: readonly PartitionRange[]): Promise<void> {
    const lows = await withAdmin(this.opts.kafka, (admin) => admin.fetchTopicOffsets(this.opts.topic));
    for (const r of ranges) {
      const low = lows.find((l) => l.partition === r.partition)?.low ?? "0";
      if (BigInt(r.endOffset) > BigInt(r.startOffset) && BigInt(low) > BigInt(r.startOffset)) {
        throw new SluiceError(
          "MANIFEST_MISMATCH",
          `partition ${r.partition} of ${this.opts.topic} now starts at offset ${low}, after this run's start ${r.startOffset} (retention deleted records); start a new run with --new-run`,
          { context: { topic: this.opts.topic, partition: r.partition } },
        );
      }
    }
  }

  async close(): Promise<void> {}
}
