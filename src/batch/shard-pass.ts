import { partName, retryPartName } from "../runs/part-name.js";
import type { SourceRow } from "../runs/row-source.js";
import type { InputDescription } from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";
import type { BatchManifest, RetryRound, ShardRecord } from "./batch-manifest.js";
import type { FailureRecord } from "./batch-sink.js";

/**
 * One pass over the input, cut into units of at most `shardSize` rows: the main pass (every row, unit
 * _k_ = rows `[k·S, (k+1)·S)`) or a retry round (the open failures sorted by row, unit _k_ = positions
 * `[k·S, (k+1)·S)` of that list). The shard loop (`runShardLoop`) runs either; this says which rows
 * belong to which unit, what the units are called and where their records go (docs/batch-mode.md).
 */
export interface ShardPass {
  /** The retry round this pass runs; null for the main pass. */
  readonly round: RetryRound | null;
  /** The manifest's list of this pass's finished units; the loop skips those already in it. */
  readonly records: ShardRecord[];
  /** Rows in the pass (null: unknown until read) and rows an earlier invocation finished. */
  readonly totalRows: number | null;
  readonly doneRows: number;
  /** The unit an input row belongs to; null when the row is not part of this pass. */
  unitOf(item: SourceRow): number | null;
  /** The unit's part name (also the stem of its part and failure files). */
  nameOf(unit: number): string;
  /** Records in the manifest that every unit is done; `rowsRead` counts every row the source gave. */
  complete(rowsRead: number): void;
}

/** The main pass: every input row, in shards of `shardSize` rows. */
export function mainPass(manifest: BatchManifest, shardSize: number): ShardPass {
  return {
    round: null,
    records: manifest.shards,
    totalRows: expectedRows(manifest.input),
    doneRows: rowsIn(manifest.shards),
    unitOf: (item) => Math.floor(item.row / shardSize),
    nameOf: partName,
    complete(rowsRead) {
      manifest.status = "complete";
      if (manifest.input.kind === "kafka") manifest.input.rows = rowsRead;
    },
  };
}

/**
 * The retry round to run: the manifest's unfinished one, else a new round over the `openFailures`
 * rows (appended to the manifest), else null when no failure is open.
 */
export function retryRoundToRun(manifest: BatchManifest, openFailures: number): RetryRound | null {
  const last = manifest.retries.at(-1);
  if (last && !last.complete) return last;
  if (openFailures === 0) return null;
  const round: RetryRound = {
    round: (last?.round ?? 0) + 1,
    rowsAttempted: openFailures,
    shards: [],
    complete: false,
    startedAt: new Date().toISOString(),
    finishedAt: null,
  };
  manifest.retries.push(round);
  return round;
}

/**
 * A retry round over `open` (the failures open when it started), in units of `shardSize` failed rows.
 * A row whose id is not the one its failure lists means the input changed under the run.
 */
export function retryPass(
  round: RetryRound,
  open: ReadonlyMap<number, FailureRecord>,
  shardSize: number,
): ShardPass {
  const position = new Map([...open.keys()].sort((a, b) => a - b).map((row, i) => [row, i]));
  return {
    round,
    records: round.shards,
    totalRows: position.size,
    doneRows: rowsIn(round.shards),
    unitOf(item) {
      const pos = position.get(item.row);
      if (pos === undefined) return null;
      const failure = open.get(item.row)!;
      if (failure.id !== item.id) {
        throw new SluiceError(
          "MANIFEST_MISMATCH",
          `row ${item.row} has id "${item.id}" but failures list "${failure.id}"; the input changed: start a new run with --new-run`,
        );
      }
      return Math.floor(pos / shardSize);
    },
    nameOf: (unit) => retryPartName(round.round, unit),
    complete() {
      round.complete = true;
      round.finishedAt = new Date().toISOString();
    },
  };
}

function rowsIn(records: readonly ShardRecord[]): number {
  return records.reduce((n, s) => n + s.rows, 0);
}

function expectedRows(input: InputDescription): number | null {
  if (input.kind === "file") return input.rows;
  if (input.rows !== null) return input.rows;
  // Upper bound: control records and aborted records take offsets too.
  return input.ranges.reduce((n, r) => n + Number(BigInt(r.endOffset) - BigInt(r.startOffset)), 0);
}
