import type { SourceRow } from "../runs/row-source.js";
import type { ShardRecord } from "./batch-manifest.js";
import type { ShardPass } from "./shard-pass.js";

/** One unit of a pass, ready to score and write. */
export interface ShardUnit {
  name: string;
  /** Rows (main pass) or positions in the round's failure list (retry round), `[rowStart, rowEnd)`. */
  rowStart: number;
  rowEnd: number;
  items: SourceRow[];
}

/** What the loop needs from its owner (docs/design.md §6.17): rows, a way to finish a unit, a stop flag. */
export interface ShardLoopContext {
  /** The input's rows in order, from the start (a fresh iterator per call). */
  items(): AsyncIterable<SourceRow>;
  /** Scores and writes one unit and records it in the pass's `records`; resolves once it is durable. */
  processShard(unit: ShardUnit): Promise<ShardRecord>;
  /** True once the owner asked to stop; checked between units, after at least one was written. */
  stopRequested(): boolean;
}

export interface ShardLoopResult {
  /** Rows ok and units written by this loop. */
  ok: number;
  shards: number;
  /** Every row the source gave (pass or not); the full count when not interrupted. */
  rowsRead: number;
  /** Stopped on request before the end: the pass is not complete. */
  interrupted: boolean;
}

/**
 * The shard loop of batch mode, for the main pass and for retry rounds alike: reads the input once,
 * groups the pass's rows by unit and hands each unit not yet recorded to `processShard`. A unit already
 * in `pass.records` is skipped (its rows are read, not scored), so a rerun never writes a done unit
 * again. Units are written one at a time, in input order. The caller marks the pass complete.
 */
export async function runShardLoop(
  pass: ShardPass,
  shardSize: number,
  context: ShardLoopContext,
): Promise<ShardLoopResult> {
  const done = new Set(pass.records.map((s) => s.key));
  let ok = 0;
  let shards = 0;
  let rowsRead = 0;
  let current = -1;
  let pending: SourceRow[] = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const rowStart = current * shardSize;
    const items = pending;
    pending = [];
    const record = await context.processShard({
      name: pass.nameOf(current),
      rowStart,
      rowEnd: rowStart + items.length,
      items,
    });
    ok += record.ok;
    shards++;
  };
  for await (const item of context.items()) {
    rowsRead++;
    const unit = pass.unitOf(item);
    if (unit === null) continue;
    if (unit !== current) {
      await flush();
      current = unit;
    }
    // Returning from the loop returns the source's iterator, which closes a topic reader.
    if (context.stopRequested() && shards > 0) return { ok, shards, rowsRead, interrupted: true };
    if (done.has(pass.nameOf(unit))) continue;
    pending.push(item);
    if (pending.length === shardSize) await flush();
  }
  await flush();
  return { ok, shards, rowsRead, interrupted: false };
}
