import type { Lane } from "../contracts/lane.js";
import type { SluiceEventMap } from "../events/sluice-events.js";
import { InFlightRunner } from "../microbatch/in-flight-runner.js";
import { type LaneBatch, LaneBatcher } from "../microbatch/lane-batcher.js";
import type { Clock } from "../time/clock.js";
import type { WorkItem } from "./request-intake.js";
import type { ProcessorSettings } from "./stream-processor-options.js";
import { givenUpCode } from "./work-item-spans.js";

export interface LaneDispatcherOptions {
  settings: Pick<ProcessorSettings, "maxBatchSize" | "maxBatchTokens" | "maxWaitMs" | "maxInFlightBatches">;
  clock: Clock;
  emitFlushed: (payload: SluiceEventMap["microbatch.flushed"]) => void;
  /** Runs one formed batch to its completions; must not reject (errors go to `onError`). */
  run: (batch: LaneBatch<WorkItem>) => Promise<void>;
  onError: (error: unknown) => void;
}

/** Weight of the newest measurement in the moving averages. */
const EWMA_WEIGHT = 0.2;

/**
 * Work items → lane batches → the model (docs/lanes.md). The `LaneBatcher` decides which lane forms
 * the next batch; each lane has its own `batching.maxInFlightBatches` slots, so an online batch never
 * waits for a backfill slot, and a batch forms only when its slot is free, so none waits in a runner
 * ahead of another (the runners are the bounded executors and what shutdown waits for). Keeps the measured inference times that feed
 * the deadline rule and the fallback predictions.
 */
export class LaneDispatcher {
  private readonly batcher: LaneBatcher<WorkItem>;
  private readonly runners: Record<Lane, InFlightRunner<LaneBatch<WorkItem>>>;
  /** Online items in formed batches that have not finished. */
  private onlineInBatches = 0;
  /** Online batches that have not finished (their items' ages are the guard's evidence). */
  private readonly onlineBatches = new Set<LaneBatch<WorkItem>>();
  private batchMsEstimate = 0;
  private itemMsEstimate = 0;

  constructor(private readonly opts: LaneDispatcherOptions) {
    const s = opts.settings;
    const runner = (lane: Lane) =>
      new InFlightRunner<LaneBatch<WorkItem>>({
        limit: s.maxInFlightBatches,
        run: async (batch) => {
          try {
            await opts.run(batch);
          } finally {
            if (lane === "online") {
              this.onlineInBatches -= batch.items.length;
              this.onlineBatches.delete(batch);
            }
            this.batcher.done(lane);
          }
        },
        onError: (error) => opts.onError(error),
      });
    this.runners = { online: runner("online"), backfill: runner("backfill") };
    this.batcher = new LaneBatcher<WorkItem>({
      maxBatchSize: s.maxBatchSize,
      maxBatchTokens: s.maxBatchTokens,
      maxWaitMs: s.maxWaitMs,
      onlineSlots: s.maxInFlightBatches,
      backfillSlots: s.maxInFlightBatches,
      clock: opts.clock,
      onBatch: (batch) => this.onBatch(batch),
    });
  }

  add(item: WorkItem): void {
    this.batcher.add(item, { lane: item.lane, tokens: item.tokens, deadlineMs: item.deadlineMs });
  }

  /** Removes the queued items `predicate` picks (given up: their spans end); returns how many. */
  drop(predicate: (item: WorkItem) => boolean): number {
    return this.batcher.drop((item) => {
      if (!predicate(item)) return false;
      item.span.abort(givenUpCode(item.task, item.generation));
      return true;
    });
  }

  /** Online requests held: queued, or in formed batches that have not finished. */
  get onlineHeld(): number {
    return this.batcher.onlineSize + this.onlineInBatches;
  }

  /**
   * Record timestamp of the oldest online request held (queued, or in a batch that has not
   * finished); undefined when none is. The SLO guard counts its age as evidence.
   */
  oldestOnlineTimestampMs(): number | undefined {
    // Asked every GUARD.tickMs, so the scan happens here rather than per batch on the hot path.
    let oldest = this.batcher.minOnline((item) => item.timestampMs);
    for (const batch of this.onlineBatches)
      for (const item of batch.items)
        if (oldest === undefined || item.timestampMs < oldest) oldest = item.timestampMs;
    return oldest;
  }

  /** Online requests that run before a new one with `deadlineMs` (earliest deadline first). */
  onlineAhead(deadlineMs: number): number {
    return this.onlineInBatches + this.batcher.onlinePositionOf(deadlineMs);
  }

  /** Measured inference ms per item (moving average over batches; 0 before the first). */
  get msPerItem(): number {
    return this.itemMsEstimate;
  }

  /** Feeds a finished batch's inference time into the estimates. */
  recordInference(size: number, inferenceMs: number): void {
    if (size <= 0) return;
    const perItem = inferenceMs / size;
    this.batchMsEstimate = ewma(this.batchMsEstimate, inferenceMs);
    this.itemMsEstimate = ewma(this.itemMsEstimate, perItem);
    this.batcher.setEstimatedInferenceMs(this.batchMsEstimate);
  }

  /** Backfill batches allowed in flight (the SLO guard's lever; 0 = none form). */
  setBackfillSlots(n: number): void {
    this.batcher.setBackfillSlots(n);
  }

  /** Flushes both lanes (reason `shutdown`). */
  close(): void {
    this.batcher.close();
  }

  async whenIdle(): Promise<void> {
    await Promise.all([this.runners.online.whenIdle(), this.runners.backfill.whenIdle()]);
  }

  private onBatch(batch: LaneBatch<WorkItem>): void {
    this.opts.emitFlushed({
      reason: batch.reason,
      lane: batch.lane,
      size: batch.items.length,
      tokens: batch.tokens,
      queueWaitMs: batch.enqueuedAtMs.map((t) => batch.formedAtMs - t),
      intakeMs: batch.items.map((item) => Math.max(0, item.enqueuedAtMs - item.timestampMs)),
    });
    if (batch.lane === "online") {
      this.onlineInBatches += batch.items.length;
      this.onlineBatches.add(batch);
    }
    this.runners[batch.lane].push(batch);
  }
}

function ewma(previous: number, sample: number): number {
  return previous === 0 ? sample : (1 - EWMA_WEIGHT) * previous + EWMA_WEIGHT * sample;
}
