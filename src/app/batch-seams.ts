import type { BatchSink } from "../batch/batch-sink.js";
import type { RowSource } from "../runs/row-source.js";

/**
 * Test seams of the batch composition root (docs/design.md §6.11). Production never sets them, and no flag,
 * config key or environment variable feeds them: a test passes them to `createBatchRuntime`, or installs
 * them in its own process before running the CLI (test/support/sluice-with-seams.ts), to fail rows on
 * purpose, slow shards down or hold a topic output's transaction open. Implementations live under
 * test/support/.
 */
export interface BatchSeams {
  /** Decorates the input source (e.g. marks chosen rows as failed). */
  wrapSource?(source: RowSource): RowSource;
  /** Decorates the output sink (e.g. pauses before each shard is written, so a test can kill the run). */
  wrapSink?(sink: BatchSink): BatchSink;
  /** Topic outputs: runs inside each shard's transaction, after the last send and before the commit. */
  beforeTopicCommit?(shardKey: string): Promise<void>;
}

let installed: BatchSeams = {};

/** Sets the seams every later `createBatchRuntime` call in this process uses by default. Tests only. */
export function installBatchSeams(seams: BatchSeams): void {
  installed = seams;
}

/** The seams installed in this process: none unless a test installed some. */
export function installedBatchSeams(): BatchSeams {
  return installed;
}
