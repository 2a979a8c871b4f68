import type { RequestDecoder } from "../contracts/request-codec.js";
import { isSluiceError } from "../sluice-error.js";
import type { PartitionTask } from "./partition-task.js";
import type { FetchedRecord } from "./processor-ports.js";
import type { ProcessorLog } from "./stream-processor-options.js";

export interface WriterSchemaGateOptions {
  decoder: Pick<RequestDecoder, "schemaIdsToLoad" | "loadSchemas">;
  log: ProcessorLog;
  /** First wait before retrying a lookup the registry could not answer, ms (doubles per try). */
  retryInitialMs: number;
  /** Longest wait between retries, ms. */
  retryMaxMs: number;
  /** The partition's records may be fetched again: resume it (unless backpressure or shutdown holds it). */
  resume: (task: PartitionTask) => void;
}

/**
 * Holds back a partition's fetched records until the registry writer schemas they need are loaded,
 * so `RequestDecoder.decode` stays synchronous and the hot path never waits on HTTP for a known
 * schema id (ids are cached; see contracts/request-writer-schemas.ts).
 *
 * When a fetch names an id not seen yet, the records are refused (the partition pauses and nothing
 * past them is taken, so nothing past them commits), the ids are looked up, and the partition resumes,
 * fetching the same records again. If the registry cannot answer (down, timing out) the lookup is
 * retried with doubling, jittered waits up to `retryMaxMs`, for as long as it takes: such records
 * are delayed, never lost and never dead-lettered. A "not found" answer (404) is final: those records
 * become UNKNOWN_SCHEMA_ID dead letters. Other partitions keep flowing.
 */
export class WriterSchemaGate {
  /** Partitions waiting for a lookup: the task generation it was started for and its retry timer. */
  private readonly waiting = new Map<
    PartitionTask,
    { generation: number; timer?: ReturnType<typeof setTimeout> }
  >();

  constructor(private readonly opts: WriterSchemaGateOptions) {}

  /** True when the records must wait (the caller refuses them); the gate resumes the partition later. */
  holds(task: PartitionTask, records: readonly FetchedRecord[]): boolean {
    const pending = this.waiting.get(task);
    if (pending?.generation === task.generation) return true;
    // A lookup of an older generation (the task was reset meanwhile) no longer resumes anything.
    if (pending?.timer) clearTimeout(pending.timer);
    this.waiting.delete(task);
    const ids = this.opts.decoder.schemaIdsToLoad(records);
    if (ids.length === 0) return false;
    this.waiting.set(task, { generation: task.generation });
    void this.load(task, task.generation, ids, 0);
    return true;
  }

  /** Stops all retries (shutdown). */
  close(): void {
    for (const { timer } of this.waiting.values()) if (timer) clearTimeout(timer);
    this.waiting.clear();
  }

  private async load(task: PartitionTask, generation: number, ids: number[], attempt: number): Promise<void> {
    try {
      await this.opts.decoder.loadSchemas(ids);
    } catch (error) {
      const mine = this.waiting.get(task)?.generation === generation;
      if (!mine || !task.isCurrent(generation)) {
        if (mine) this.waiting.delete(task);
        return;
      }
      const waitMs = Math.min(this.opts.retryMaxMs, this.opts.retryInitialMs * 2 ** attempt);
      const jittered = Math.round(waitMs * (0.8 + 0.4 * Math.random()));
      // An outage heals by itself (warn); refused credentials need a person (error). Both keep the
      // records and retry: dead-lettering a valid record because of the registry would lose it.
      const permanent = isSluiceError(error) && !error.retriable;
      this.opts.log[permanent ? "error" : "warn"](
        {
          ...task.tp,
          schemaIds: ids,
          attempt: attempt + 1,
          retryInMs: jittered,
          err: error instanceof Error ? error.message : String(error),
        },
        "schema registry lookup failed: partition waits (records are kept, not dead-lettered) and retries",
      );
      const timer = setTimeout(() => void this.load(task, generation, ids, attempt + 1), jittered);
      timer.unref?.();
      this.waiting.set(task, { generation, timer });
      return;
    }
    if (this.waiting.get(task)?.generation !== generation) return; // closed or superseded meanwhile
    this.waiting.delete(task);
    if (attempt > 0) this.opts.log.info({ ...task.tp, schemaIds: ids }, "schema registry lookup succeeded");
    if (task.isCurrent(generation)) this.opts.resume(task);
  }
}
