import { decodeModelBoundary, type ModelBoundary } from "../contracts/model-control.js";
import { Deduplicator } from "../delivery/deduplicator.js";
import { isAccessFailure, type SluiceError } from "../sluice-error.js";
import type { PartitionTask } from "./partition-task.js";
import type { RestoredChangelog, RestoreSources, TaskCommitter } from "./processor-ports.js";
import type { ProcessorLog } from "./stream-processor-options.js";

/** The little a restore needs from the processor (never the processor itself). */
export interface RestoreContext {
  isStopping(): boolean;
  /** Creates and initialises the task's committer, which fences any previous owner. */
  createCommitter(task: PartitionTask): Promise<TaskCommitter>;
  /** The dedup budget per partition right now. */
  dedupEntriesPerPartition(): number;
  /** The task runs from `offset`: seek there and resume unless backpressured. */
  onRestored(task: PartitionTask, info: RestoredInfo): void;
}

export interface RestoredInfo {
  offset: string;
  groupOffset: string;
  /** The partition's last committed model switch boundary (docs/model-upgrades.md); undefined when none. */
  modelBoundary?: ModelBoundary | undefined;
  dedupEntries: number;
  durationMs: number;
}

export interface PartitionRestorerOptions {
  sources: RestoreSources;
  dedupTtlMs: number;
  /** Wait before retrying a failed restore, ms. */
  retryMs: number;
  log: ProcessorLog;
  /** A restore failed with a security failure (isAccessFailure): it is not retried; this is told. */
  onAccessFailure?: (error: SluiceError) => void;
}

/**
 * Brings assigned tasks from restoring to running (Kafka Streams' `StoreChangelogReader`). Order
 * matters (docs/exactly-once.md): 1. init the partition's transactional producer, which fences the
 * previous owner and completes its open transaction; 2. only then read the committed offset and the
 * changelog, which can no longer change behind our back; 3. rebuild dedup, seek and resume. A failed
 * restore gives its producers back and is retried after `retryMs` while the task is still restoring.
 */
export class PartitionRestorer {
  private readonly opts: PartitionRestorerOptions;
  private readonly restores = new Set<Promise<void>>();
  /**
   * Per partition key, the last producer initialisation of this process (settled = done, and closed if
   * it was stale). A restore waits for it before initialising its own, so a late initialisation of an
   * older restore can never fence a newer owner in this same process.
   */
  private readonly producerInits = new Map<string, Promise<void>>();

  constructor(options: PartitionRestorerOptions) {
    this.opts = options;
  }

  /** Starts restoring `tasks` (all restoring) and remembers it so `settled()` can wait for it. */
  start(tasks: PartitionTask[], ctx: RestoreContext): void {
    const p = this.restore(tasks, ctx).finally(() => this.restores.delete(p));
    this.restores.add(p);
  }

  /** Resolves when every restore started so far has finished (shutdown waits for it). */
  async settled(): Promise<void> {
    while (this.restores.size > 0) await Promise.all([...this.restores]);
  }

  /** After the last restore: releases the sources' connections. */
  async close(): Promise<void> {
    await this.settled();
    await this.opts.sources.close();
  }

  private async restore(tasks: PartitionTask[], ctx: RestoreContext): Promise<void> {
    const started = Date.now();
    const generations = new Map(tasks.map((t) => [t, t.generation]));
    const stale = (t: PartitionTask) => !t.isRestoring(generations.get(t) as number) || ctx.isStopping();
    // Revoked, reset again or stopping meanwhile: nothing is left to restore (a stopping processor
    // closes what was installed; an init that met `stale` gave its producer back and installed none).
    const current = () => tasks.filter((t) => !stale(t));
    try {
      // allSettled: every initialisation finishes (and a stale one gives its producer back) before
      // the failure path closes what was installed, so none is left behind or installs itself late.
      const inits = await Promise.allSettled(tasks.map((t) => this.initCommitter(t, ctx, stale)));
      const failed = inits.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed) throw failed.reason;
      const live = current();
      if (live.length === 0) return;
      const offsets = await this.opts.sources.committedOffsets(live.map((t) => t.tp));
      const restored = await this.readChangelogs(live);
      for (const task of current()) {
        const dedup = new Deduplicator({
          ttlMs: this.opts.dedupTtlMs,
          maxEntries: ctx.dedupEntriesPerPartition(),
        });
        const changelog = restored.get(task);
        const stats = dedup.restore(changelog?.entries ?? [], Date.now());
        // The changelog checkpoint is the stable truth after the fence; the group's committed offset
        // may still lag behind it (no require_stable in kafkajs, see src/kafka/read/changelog-reader.ts).
        const groupOffset = offsets.get(task.key) as string;
        const checkpoint = changelog?.nextOffset;
        const offset =
          checkpoint !== undefined && BigInt(checkpoint) > BigInt(groupOffset) ? checkpoint : groupOffset;
        task.start(dedup, offset);
        ctx.onRestored(task, {
          offset,
          groupOffset,
          modelBoundary: decodeModelBoundary(changelog?.modelBoundary),
          dedupEntries: stats.entries,
          durationMs: Date.now() - started,
        });
      }
    } catch (error) {
      const live = current();
      // A failure of partitions that are no longer ours (or of a processor that is stopping) is moot.
      if (live.length === 0) return;
      if (isAccessFailure(error) && this.opts.onAccessFailure) {
        // Retrying cannot help (credentials, an ACL, a certificate): give the producers back and stop.
        await Promise.all(live.map((t) => t.takeCommitter()?.close({ commit: false })));
        this.opts.onAccessFailure(error);
        return;
      }
      this.opts.log.warn(
        {
          partitions: live.map((t) => t.describe()),
          err: error instanceof Error ? error.message : String(error),
        },
        `partition restore failed; retrying in ${this.opts.retryMs} ms`,
      );
      await Promise.all(live.map((t) => t.takeCommitter()?.close({ commit: false })));
      if (ctx.isStopping()) return;
      await new Promise((r) => setTimeout(r, this.opts.retryMs));
      const still = live.filter((t) => t.isRestoring(generations.get(t) as number));
      if (still.length > 0 && !ctx.isStopping()) await this.restore(still, ctx);
    }
  }

  /** Serialised per partition key (see `producerInits`). */
  private initCommitter(
    task: PartitionTask,
    ctx: RestoreContext,
    stale: (t: PartitionTask) => boolean,
  ): Promise<void> {
    const previous = this.producerInits.get(task.key) ?? Promise.resolve();
    const init = previous.then(async () => {
      if (stale(task)) return;
      const created = await ctx.createCommitter(task);
      // Revoked, reset again or stopping meanwhile: give the producer back here.
      if (stale(task)) await created.close({ commit: false });
      else task.installCommitter(created);
    });
    const settled = init.then(
      () => undefined,
      () => undefined,
    );
    this.producerInits.set(task.key, settled);
    void settled.then(() => {
      if (this.producerInits.get(task.key) === settled) this.producerInits.delete(task.key);
    });
    return init;
  }

  /** One read per changelog topic, for all its partitions among `tasks`. */
  private async readChangelogs(tasks: PartitionTask[]): Promise<Map<PartitionTask, RestoredChangelog>> {
    const byChangelog = new Map<string, PartitionTask[]>();
    for (const t of tasks)
      byChangelog.set(t.changelogTopic, [...(byChangelog.get(t.changelogTopic) ?? []), t]);
    const restored = new Map<PartitionTask, RestoredChangelog>();
    for (const [topic, list] of byChangelog) {
      const entries = await this.opts.sources.readChangelog(
        topic,
        list.map((t) => t.tp.partition),
      );
      for (const t of list)
        restored.set(t, entries.get(t.tp.partition) ?? { entries: [], nextOffset: undefined });
    }
    return restored;
  }
}
