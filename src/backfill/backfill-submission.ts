import type { Codec } from "../contracts/codec.js";
import { MODEL_VERSION_HEADER, RUN_ID_HEADER } from "../contracts/lane.js";
import { encodeRequest } from "../contracts/request-codec.js";
import type { RowSource } from "../runs/row-source.js";
import {
  asSubmitted,
  assertSameSubmission,
  type InvalidRow,
  newRunManifest,
  type PlacedRecords,
  type RunManifest,
  withChunk,
} from "./run-manifest.js";

/** Header carrying the input row number of a backfill record (export orders and reports by it). */
export const RUN_ROW_HEADER = "sluice.run-row";

/** One row as it goes to the backfill topic: keyed by id, tagged with the run and its row. */
export interface BackfillRecord {
  id: string;
  row: number;
  value: Buffer;
  headers: Record<string, string>;
}

/**
 * The transactional writer of one run (a Kafka adapter: src/kafka/runs/backfill-run-writer.ts). Its
 * transactional id is derived from the run id, so opening it fences any earlier submitter of the run
 * and aborts that submitter's open transaction; only then is the last committed manifest read.
 */
export interface RunWriter {
  /** Fences earlier writers of this run; returns the run's last committed manifest (null: new run). */
  open(): Promise<RunManifest | null>;
  /**
   * One transaction: `records` on the backfill topic, then the manifest `next` derives from where they
   * landed, on the runs topic. Returns that manifest once committed. `refused` are the records the
   * broker refuses as too large even alone: left out of the chunk, recorded as invalid rows.
   */
  commitChunk(
    records: readonly BackfillRecord[],
    next: (placed: PlacedRecords[], refused: InvalidRow[]) => RunManifest,
  ): Promise<RunManifest>;
  close(): Promise<void>;
}

export interface BackfillSubmissionOptions {
  source: RowSource;
  writer: RunWriter;
  /** Manifest fields of a new run (identity of what and where; the input comes from the source). */
  run: Pick<RunManifest, "runId" | "sluice" | "topics" | "model" | "config" | "configHash">;
  /** Codec of the records written (topics.requestCodec). */
  codec: Codec;
  /** Input rows per transaction. */
  chunkRows: number;
  /**
   * Largest record value accepted (`delivery.maxMessageBytes`, which `serve` enforces too); a bigger
   * row is recorded as invalid (PAYLOAD_TOO_LARGE) instead of failing its transaction on every retry.
   */
  maxRecordBytes: number;
  /** Called after every committed chunk. */
  onChunk?: (manifest: RunManifest) => void;
  /**
   * Ids an earlier invocation already submitted for this run (read back from the backfill topic); asked
   * only when resuming, so a repeated id is caught across a crash too.
   */
  submittedIds?: (manifest: RunManifest) => Promise<Iterable<string>>;
}

export interface SubmissionSummary {
  runId: string;
  action: "submitted" | "resumed" | "already-submitted";
  /** Rows written by this invocation. */
  rowsWritten: number;
  /** Rows an earlier invocation had already handled (skipped here). */
  rowsSkipped: number;
  manifest: RunManifest;
}

/**
 * `sluice backfill submit`: writes an input's rows to the backfill topic in transactions of
 * `chunkRows` rows, each carrying the run's updated manifest. Resumable and idempotent: it resumes at
 * the committed manifest's `rowsRead` (so nothing already there is written again), and a finished run
 * writes nothing. A row that cannot be submitted (no id, undecodable, non-string text) is recorded in
 * the manifest as invalid instead, with its reason; it never stops the run.
 */
export class BackfillSubmission {
  constructor(private readonly opts: BackfillSubmissionOptions) {}

  async run(): Promise<SubmissionSummary> {
    const { source, writer, run } = this.opts;
    await source.assertReadable?.();
    const existing = await writer.open();
    const input = await source.describe(existing?.input);
    if (existing) {
      assertSameSubmission(existing, {
        input,
        topics: run.topics,
        config: run.config,
        configHash: run.configHash,
        model: run.model,
      });
      if (existing.status === "submitted") {
        return {
          runId: run.runId,
          action: "already-submitted",
          rowsWritten: 0,
          rowsSkipped: existing.rowsRead,
          manifest: existing,
        };
      }
    }
    let manifest = existing ?? newRunManifest({ ...run, input });
    // A candidate run names its model version on every row (docs/model-upgrades.md).
    const runHeaders: Record<string, string> = {
      [RUN_ID_HEADER]: run.runId,
      ...(run.model.role === "candidate" && run.model.expectedVersion
        ? { [MODEL_VERSION_HEADER]: run.model.expectedVersion }
        : {}),
    };
    const skip = manifest.rowsRead;
    // Ids must be unique within a run: serve would count a repeat as a duplicate (no result of its
    // own), so the run could never be complete. A repeat is recorded as invalid instead.
    const ids = new Set<string>(
      existing && existing.rowsSubmitted > 0 && this.opts.submittedIds
        ? await this.opts.submittedIds(existing)
        : [],
    );
    let rowsWritten = 0;
    let records: BackfillRecord[] = [];
    let invalid: InvalidRow[] = [];
    let rowsRead = skip;
    const commit = async (last: boolean) => {
      const batch = records;
      const bad = invalid;
      const read = rowsRead;
      records = [];
      invalid = [];
      const before = manifest;
      let written = batch.length;
      manifest = await writer.commitChunk(batch, (placed, refused) => {
        written = batch.length - refused.length;
        const next = withChunk(before, { rowsRead: read, placed, invalid: [...bad, ...refused] });
        return last ? asSubmitted(next, input) : next;
      });
      rowsWritten += written;
      this.opts.onChunk?.(manifest);
    };
    for await (const item of source.items()) {
      if (item.row < skip) continue;
      rowsRead = item.row + 1;
      if (item.error) {
        invalid.push({ row: item.row, code: item.error.code, message: item.error.message });
      } else if (item.tensors !== undefined && this.opts.codec !== "v2-json") {
        invalid.push({
          row: item.row,
          code: "SCHEMA_VIOLATION",
          message: `row ${item.row} carries tensors, which only topics.requestCodec v2-json can submit`,
        });
      } else if (typeof item.text !== "string") {
        invalid.push({
          row: item.row,
          code: "INVALID_TEXT",
          message: `row ${item.row} (id ${JSON.stringify(item.id)}) has no string text`,
        });
      } else {
        const encoded = encodeRequest(
          {
            id: item.id,
            text: item.text,
            attributes: item.attributes,
            ...(item.tensors ? { tensors: item.tensors } : {}),
          },
          this.opts.codec,
        );
        if (encoded.value.length > this.opts.maxRecordBytes) {
          invalid.push({
            row: item.row,
            code: "PAYLOAD_TOO_LARGE",
            message: `row ${item.row} is ${encoded.value.length} bytes as a request, above delivery.maxMessageBytes (${this.opts.maxRecordBytes})`,
          });
          if (records.length + invalid.length >= this.opts.chunkRows) await commit(false);
          continue;
        }
        if (ids.has(item.id)) {
          invalid.push({
            row: item.row,
            code: "DUPLICATE_ID",
            message: `row ${item.row} repeats id ${JSON.stringify(item.id)} of an earlier row; ids must be unique within a run`,
          });
          if (records.length + invalid.length >= this.opts.chunkRows) await commit(false);
          continue;
        }
        ids.add(item.id);
        records.push({
          id: item.id,
          row: item.row,
          value: encoded.value,
          headers: { ...encoded.headers, ...runHeaders, [RUN_ROW_HEADER]: String(item.row) },
        });
      }
      if (records.length + invalid.length >= this.opts.chunkRows) await commit(false);
    }
    await commit(true);
    return {
      runId: run.runId,
      action: skip > 0 ? "resumed" : "submitted",
      rowsWritten,
      rowsSkipped: skip,
      manifest,
    };
  }
}
