import type { InferenceOutput, ModelIdentity } from "../contracts/inference.js";

/**
 * One successful output row. Part files hold exactly these fields, in this order, and nothing
 * time-dependent, so the same input, model and config give byte-identical parts (docs/batch-mode.md).
 */
export interface BatchResultRow {
  id: string;
  /** Input row number (0-based). */
  row: number;
  status: "ok";
  output: InferenceOutput;
  model: ModelIdentity;
  truncated: boolean;
  attributes: Record<string, string> | null;
  /** For topic inputs: where the request came from. */
  source: { topic: string; partition: number; offset: string } | null;
}

/** A row that did not produce a result, with why. One JSON line of a failure file. */
export interface FailureRecord {
  id: string;
  row: number;
  code: string;
  message: string;
}

/** Facts a topic sink passes to the engine before it commits, so a crash can be recovered. */
export interface InFlightShard {
  key: string;
  transactionalId: string;
  /** Output topic end offsets before the transaction started (where to look for its records). */
  outputOffsets: { partition: number; offset: string }[];
}

export interface ShardWriteHooks {
  /** Runs inside the shard's transaction, right before it commits, with the rows left out (may be none). */
  beforeCommit(rejected: readonly FailureRecord[]): Promise<void>;
}

export interface BatchSink {
  /** `file://DIR` or `kafka:TOPIC`. */
  readonly uri: string;
  /** `jsonl`, `avro` or `kafka-json` / `kafka-avro`. */
  readonly format: string;
  /** Clears leftovers of an interrupted run (temporary files) before any shard is written. */
  prepare(): Promise<void>;
  /** Tells the sink which run it writes for (topic sinks derive transactional ids from it). */
  bindRun?(runId: string): void;
  /** Topic sinks only: called before `writeShard`; the engine records the answer in the manifest. */
  beginShard?(key: string): Promise<InFlightShard>;
  /**
   * Writes one shard's rows atomically: after it resolves they are all visible, after a crash none.
   * Returns the output location (relative name) and, for files, the SHA-256 of the bytes. A topic
   * sink may leave out rows that can never be written (a result the broker refuses as too large even
   * alone); it tells `hooks.beforeCommit` which, before the shard commits, so the job records them as
   * failed rows of the shard in the same step that makes the shard done.
   */
  writeShard(
    key: string,
    rows: readonly BatchResultRow[],
    hooks?: ShardWriteHooks,
  ): Promise<{ output: string; sha256: string | null }>;
  /**
   * Topic sinks only: after a crash, fences the shard's old producer and tells whether its
   * transaction committed (then the shard is done and must not be written again).
   */
  recoverInFlight?(shard: InFlightShard): Promise<{ committed: boolean; records: number }>;
  /** Removes a shard's output (used by --new-run for file outputs). */
  removeOutput?(output: string): Promise<void>;
  close(): Promise<void>;
}
