import type { Kafka, KafkaMessage } from "kafkajs";
import { RUN_ROW_HEADER } from "../../backfill/backfill-submission.js";
import type { RunManifest } from "../../backfill/run-manifest.js";
import type { RunOutcomes, SubmittedRow } from "../../backfill/run-outcomes.js";
import { headerValue, type RecordHeaders } from "../../contracts/codec.js";
import { RUN_ID_HEADER } from "../../contracts/lane.js";
import { decodeResult } from "../../contracts/result-codec.js";
import { DEAD_LETTER_HEADERS } from "../../delivery/dead-letter.js";
import { withAdmin } from "../client/admin-session.js";
import { readKafkaRanges } from "../read/kafka-range-reader.js";

/**
 * Reads what happened to a backfill run's rows, with `read_committed` (so only committed outcomes
 * count): its results on the backfill results topic and its dead letters, both found by their
 * `sluice.run-id` header, and the submitted rows themselves from the offset ranges in its manifest.
 * Results and dead letters are read from the first offset at or after the run's creation time (minus
 * `clockSkewMs`), so an old, long results topic is not read from its start.
 */
export class RunOutcomeReader {
  constructor(
    private readonly kafka: Kafka,
    private readonly clockSkewMs = 5 * 60_000,
  ) {}

  async outcomes(manifest: RunManifest): Promise<RunOutcomes> {
    const sinceMs = Date.parse(manifest.createdAt) - this.clockSkewMs;
    const out: RunOutcomes = { results: [], deadLetters: [] };
    for await (const { message } of this.runRecords(manifest.topics.results, manifest.runId, sinceMs)) {
      if (message.value === null) continue;
      try {
        out.results.push(decodeResult(message.value, message.headers as RecordHeaders));
      } catch {
        // Not a result (another producer on a shared topic): not ours to judge.
      }
    }
    for await (const { message } of this.runRecords(manifest.topics.deadLetters, manifest.runId, sinceMs)) {
      const h = message.headers as RecordHeaders | undefined;
      out.deadLetters.push({
        id: message.key?.toString("utf8") ?? "",
        row: rowOf(h),
        partition: Number(headerValue(h, DEAD_LETTER_HEADERS.partition) ?? -1),
        code: headerValue(h, DEAD_LETTER_HEADERS.code) ?? "UNKNOWN",
        message: headerValue(h, DEAD_LETTER_HEADERS.message) ?? "",
      });
    }
    return out;
  }

  /** The run's rows on the backfill topic, in partition and offset order. */
  async submittedRows(manifest: RunManifest): Promise<SubmittedRow[]> {
    const rows: SubmittedRow[] = [];
    for await (const { partition, message } of readKafkaRanges({
      kafka: this.kafka,
      topic: manifest.topics.backfill,
      ranges: manifest.partitions,
    })) {
      const h = message.headers as RecordHeaders | undefined;
      if (headerValue(h, RUN_ID_HEADER) !== manifest.runId) continue;
      rows.push({
        row: rowOf(h),
        id: message.key?.toString("utf8") ?? "",
        partition,
        offset: message.offset,
      });
    }
    return rows;
  }

  private async *runRecords(
    topic: string,
    runId: string,
    sinceMs: number,
  ): AsyncGenerator<{ partition: number; message: KafkaMessage }> {
    const ranges = await withAdmin(this.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(topic)) return [];
      const ends = await admin.fetchTopicOffsets(topic);
      const starts = await admin.fetchTopicOffsetsByTimestamp(topic, Math.max(0, sinceMs));
      return ends.map((e) => ({
        partition: e.partition,
        startOffset: starts.find((s) => s.partition === e.partition)?.offset ?? e.low,
        endOffset: e.high,
      }));
    });
    for await (const record of readKafkaRanges({
      kafka: this.kafka,
      topic,
      ranges,
    })) {
      if (headerValue(record.message.headers as RecordHeaders | undefined, RUN_ID_HEADER) === runId) {
        yield record;
      }
    }
  }
}

function rowOf(headers: RecordHeaders | undefined): number {
  const raw = headerValue(headers, RUN_ROW_HEADER);
  const n = raw === undefined ? Number.NaN : Number(raw);
  return Number.isInteger(n) ? n : -1;
}
