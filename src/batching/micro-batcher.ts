import {
  type BatchPolicyOptions,
  decideBatch,
  type FlushReason,
  type QueueState,
  validateBatchPolicyOptions,
} from "./batch-policy.js";
import { FlushTimer } from "./flush-timer.js";

/**
 * Collects items into batches by size, tokens, wait time and deadlines (see batch-policy.ts) and
 * hands each batch to `onBatch` synchronously. Items leave in arrival order; batches span partitions.
 * Backpressure is the caller's job: watch `size` / `queuedTokens` and pause the source.
 *
 * `onBatch` must not throw: the items are already out of the queue when it runs, so a throw would lose
 * them (the processor wraps its async work and reports errors through its own channel).
 */
export interface BatcherClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface MicroBatch<T> {
  items: T[];
  reason: FlushReason;
  /** When the batch was formed, clock ms. */
  formedAtMs: number;
  /** Enqueue time of each item (same order as `items`), clock ms; `formedAtMs − enqueuedAtMs` is queue wait. */
  enqueuedAtMs: number[];
  /** Sum of the items' token counts. */
  tokens: number;
}

export interface MicroBatcherOptions<T> {
  /** Most items per batch. Default 32. */
  maxBatchSize?: number;
  /** Most tokens per batch. Default 8192. */
  maxBatchTokens?: number;
  /** Longest wait of the oldest item for company, ms. Default 10. */
  maxWaitMs?: number;
  /** Initial expected batch inference time, ms (feeds the deadline rule). Default 0. */
  estimatedInferenceMs?: number;
  /** Default: Date.now and the global timers (epoch ms, because deadlines are epoch ms). */
  clock?: BatcherClock;
  onBatch: (batch: MicroBatch<T>) => void;
}

export const MICRO_BATCHER_DEFAULTS = { maxBatchSize: 32, maxBatchTokens: 8192, maxWaitMs: 10 } as const;

/** Date.now and the global timers. */
export const systemClock: BatcherClock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Compact the backing arrays once this many consumed slots sit before `head`. */
const COMPACT_THRESHOLD = 1024;

export class MicroBatcher<T> {
  private readonly policy: Required<BatchPolicyOptions>;
  private readonly clock: BatcherClock;
  private readonly onBatch: (batch: MicroBatch<T>) => void;

  // Parallel arrays with a head index: O(1) enqueue and dequeue without Array.shift (DESIGN.md §6.10).
  private items: T[] = [];
  private tokens: number[] = [];
  private deadlines: (number | null)[] = [];
  private enqueued: number[] = [];
  private head = 0;
  private totalTokens = 0;
  /** Earliest deadline among queued items; exact after add, recomputed by scan after removals. */
  private earliestDeadline: number | null = null;

  private readonly timer: FlushTimer;
  private closing = false;
  private closed = false;
  private evaluating = false;
  private readonly tokenAt = (i: number): number => this.tokens[this.head + i] ?? 0;

  constructor(opts: MicroBatcherOptions<T>) {
    this.policy = {
      maxBatchSize: opts.maxBatchSize ?? MICRO_BATCHER_DEFAULTS.maxBatchSize,
      maxBatchTokens: opts.maxBatchTokens ?? MICRO_BATCHER_DEFAULTS.maxBatchTokens,
      maxWaitMs: opts.maxWaitMs ?? MICRO_BATCHER_DEFAULTS.maxWaitMs,
      estimatedInferenceMs: opts.estimatedInferenceMs ?? 0,
    };
    validateBatchPolicyOptions(this.policy, "MicroBatcher");
    if (typeof opts.onBatch !== "function") throw new TypeError("MicroBatcher: onBatch must be a function");
    this.clock = opts.clock ?? systemClock;
    this.onBatch = opts.onBatch;
    this.timer = new FlushTimer(this.clock, () => {
      if (!this.closed) this.evaluate();
    });
  }

  get size(): number {
    return this.items.length - this.head;
  }

  get queuedTokens(): number {
    return this.totalTokens;
  }

  /** `tokens` ≥ 0 (after truncation); `deadlineMs` epoch ms or null. Throws after `close()`. */
  add(item: T, meta: { tokens: number; deadlineMs: number | null }): void {
    if (this.closed) throw new Error("MicroBatcher: add() after close(); create a new batcher");
    const tokens = meta.tokens;
    if (!Number.isFinite(tokens) || tokens < 0) {
      throw new RangeError(`MicroBatcher: tokens must be a finite number ≥ 0, got ${String(tokens)}`);
    }
    const deadline = meta.deadlineMs ?? null;
    this.items.push(item);
    this.tokens.push(tokens);
    this.deadlines.push(deadline);
    this.enqueued.push(this.clock.now());
    this.totalTokens += tokens;
    if (deadline !== null && (this.earliestDeadline === null || deadline < this.earliestDeadline)) {
      this.earliestDeadline = deadline;
    }
    this.evaluate();
  }

  /** Flushes everything now, in batches that respect the size and token limits. */
  flush(reason: FlushReason = "shutdown"): void {
    while (this.size > 0) {
      const decision = decideBatch(this.state(true), this.clock.now(), this.policy);
      this.emit(reason, decision.flush ? decision.take : this.size);
    }
    this.timer.cancel();
  }

  /** Removes queued items matching `predicate` (e.g. of a revoked partition); returns how many. */
  drop(predicate: (item: T) => boolean): number {
    const keep = {
      items: [] as T[],
      tokens: [] as number[],
      deadlines: [] as (number | null)[],
      enqueued: [] as number[],
    };
    let dropped = 0;
    for (let i = this.head; i < this.items.length; i++) {
      const item = this.items[i] as T;
      if (predicate(item)) {
        dropped++;
        continue;
      }
      keep.items.push(item);
      keep.tokens.push(this.tokens[i] ?? 0);
      keep.deadlines.push(this.deadlines[i] ?? null);
      keep.enqueued.push(this.enqueued[i] ?? 0);
    }
    if (dropped === 0) return 0;
    this.items = keep.items;
    this.tokens = keep.tokens;
    this.deadlines = keep.deadlines;
    this.enqueued = keep.enqueued;
    this.head = 0;
    this.recomputeAggregates();
    if (this.size === 0) this.timer.cancel();
    else this.evaluate();
    return dropped;
  }

  /** Feeds the deadline rule with a fresh estimate of batch inference time, ms. */
  setEstimatedInferenceMs(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) {
      throw new RangeError(
        `MicroBatcher: estimatedInferenceMs must be a finite number ≥ 0, got ${String(ms)}`,
      );
    }
    this.policy.estimatedInferenceMs = ms;
    if (this.size > 0 && !this.closed) this.evaluate();
  }

  /** Flushes the rest with reason `shutdown` and stops the timer. Safe to call twice. */
  close(): void {
    if (this.closed) return;
    this.closing = true;
    this.flush("shutdown");
    this.closed = true;
  }

  private state(closing = this.closing): QueueState {
    return {
      count: this.size,
      tokens: this.totalTokens,
      oldestEnqueuedAtMs: this.size > 0 ? (this.enqueued[this.head] ?? null) : null,
      earliestDeadlineMs: this.earliestDeadline,
      closing,
      tokenAt: this.tokenAt,
    };
  }

  private evaluate(): void {
    // onBatch may call add() synchronously; the running loop picks the new item up.
    if (this.evaluating) return;
    this.evaluating = true;
    try {
      for (;;) {
        const now = this.clock.now();
        const decision = decideBatch(this.state(), now, this.policy);
        if (decision.flush) {
          this.emit(decision.reason, decision.take);
          continue;
        }
        this.timer.schedule(decision.waitMs, now);
        return;
      }
    } finally {
      this.evaluating = false;
    }
  }

  private emit(reason: FlushReason, take: number): void {
    const start = this.head;
    const end = start + Math.max(1, Math.min(take, this.size));
    const items = this.items.slice(start, end);
    const enqueuedAtMs = this.enqueued.slice(start, end);
    let tokens = 0;
    let removedEarliest = false;
    for (let i = start; i < end; i++) {
      tokens += this.tokens[i] ?? 0;
      if (this.deadlines[i] === this.earliestDeadline && this.earliestDeadline !== null)
        removedEarliest = true;
      // Release references so flushed items can be collected before compaction.
      (this.items as (T | undefined)[])[i] = undefined;
    }
    this.head = end;
    this.totalTokens -= tokens;
    this.compactIfNeeded();
    if (removedEarliest) this.recomputeEarliestDeadline();
    if (this.size === 0) {
      this.totalTokens = 0;
      this.earliestDeadline = null;
    }
    this.onBatch({ items, reason, formedAtMs: this.clock.now(), enqueuedAtMs, tokens });
  }

  private compactIfNeeded(): void {
    if (this.head === this.items.length) {
      this.items = [];
      this.tokens = [];
      this.deadlines = [];
      this.enqueued = [];
      this.head = 0;
    } else if (this.head >= COMPACT_THRESHOLD && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.tokens = this.tokens.slice(this.head);
      this.deadlines = this.deadlines.slice(this.head);
      this.enqueued = this.enqueued.slice(this.head);
      this.head = 0;
    }
  }

  private recomputeEarliestDeadline(): void {
    let earliest: number | null = null;
    for (let i = this.head; i < this.deadlines.length; i++) {
      const d = this.deadlines[i];
      if (d !== null && d !== undefined && (earliest === null || d < earliest)) earliest = d;
    }
    this.earliestDeadline = earliest;
  }

  private recomputeAggregates(): void {
    let total = 0;
    for (let i = this.head; i < this.tokens.length; i++) total += this.tokens[i] ?? 0;
    this.totalTokens = total;
    this.recomputeEarliestDeadline();
  }
}
