import type { BatchSeams } from "../../src/app/batch-seams.js";
import type { BatchSink } from "../../src/batch/batch-sink.js";
import type { RowSource, SourceRow } from "../../src/runs/row-source.js";

/** What a test asks of the batch seams; JSON, so it can cross into a CLI child process. */
export interface BatchSeamSpec {
  /** These ids fail with INFERENCE_FAILED, as if the model had failed on them. */
  failIds?: string[];
  /** Pause before each shard is written, ms (lets a test kill the process mid-run). */
  shardDelayMs?: number;
  /** Topic outputs: pause inside each shard's transaction, between the last send and the commit, ms. */
  commitDelayMs?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export function batchSeams(spec: BatchSeamSpec): BatchSeams {
  const seams: BatchSeams = {};
  const { failIds, shardDelayMs, commitDelayMs } = spec;
  if (failIds?.length) seams.wrapSource = (source) => failingIds(source, new Set(failIds));
  if (shardDelayMs) seams.wrapSink = (sink) => delayedShards(sink, shardDelayMs);
  if (commitDelayMs) seams.beforeTopicCommit = () => sleep(commitDelayMs);
  return seams;
}

/**
 * The source's rows, with those of `ids` marked failed (INFERENCE_FAILED) so they go straight to the
 * failures, exactly as rows the model failed on; the model never sees them.
 */
export function failingIds(source: RowSource, ids: ReadonlySet<string>): RowSource {
  return {
    describe: (previous) => source.describe(previous),
    async *items(): AsyncIterable<SourceRow> {
      for await (const item of source.items()) {
        yield ids.has(item.id) && !item.error
          ? {
              ...item,
              error: { code: "INFERENCE_FAILED", message: "failed on purpose by the failIds test seam" },
            }
          : item;
      }
    },
    close: () => source.close(),
  };
}

/** The sink, pausing `ms` before each shard is written; optional methods stay absent when absent. */
export function delayedShards(sink: BatchSink, ms: number): BatchSink {
  const { bindRun, beginShard, recoverInFlight, removeOutput } = sink;
  return {
    uri: sink.uri,
    format: sink.format,
    prepare: () => sink.prepare(),
    ...(bindRun && { bindRun: (runId: string) => bindRun.call(sink, runId) }),
    ...(beginShard && { beginShard: (key: string) => beginShard.call(sink, key) }),
    async writeShard(key, rows, hooks) {
      await sleep(ms);
      return sink.writeShard(key, rows, hooks);
    },
    ...(recoverInFlight && { recoverInFlight: (shard) => recoverInFlight.call(sink, shard) }),
    ...(removeOutput && { removeOutput: (output: string) => removeOutput.call(sink, output) }),
    close: () => sink.close(),
  };
}
