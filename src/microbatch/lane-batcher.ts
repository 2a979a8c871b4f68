import type { Lane } from "../contracts/lane.js";
import { type Clock, systemClock } from "../time/clock.js";
import {
  type BatchPolicyOptions,
  decideLanes,
  type FlushReason,
  type QueueState,
  validateBatchPolicyOptions,
} from "./batch-policy.js";
import { FlushTimer } from "./flush-timer.js";

/** A batch of one lane. */
export interface LaneBatch<T> {
  lane: Lane;
  items: T[];
  reason: FlushReason;
  /** When the batch was formed, clock ms. */
  formedAtMs: number;
  /** Enqueue time of each item (same order as `items`), clock ms; `formedAtMs − enqueuedAtMs` is queue wait. */
  enqueuedAtMs: number[];
  /** Sum of the items' token counts. */
  tokens: number;
}

/**
 * Resolved options: the limits come from the configuration (`batching.*`, defaults in
 * src/config/config-schema.ts), so none has a default here.
 */
export interface LaneBatcherOptions<T> {
  /** Most items per batch (both lanes): `batching.maxBatchSize`. */
  maxBatchSize: number;
  /** Most tokens per batch (both lanes): `batching.maxBatchTokens`. */
  maxBatchTokens: number;
  /** Longest wait of the oldest online item for company, ms: `batching.maxWaitMs`. */
  maxWaitMs: number;
  /** Initial expected batch inference time, ms (feeds the online deadline rule). Default 0. */
  estimatedInferenceMs?: number;
  /** Most online batches handed out and not yet `done("online")`. Positive integer (`batching.maxInFlightBatches`). */
  onlineSlots: number;
  /** Most backfill batches handed out and not yet `done("backfill")`. Positive integer (`batching.maxInFlightBatches`). */
  backfillSlots: number;
  clock?: Clock;
  /** Runs synchronously and must not throw (the items have left the queue). */
  onBatch: (batch: LaneBatch<T>) => void;
}

interface Entry<T> {
  item: T;
  tokens: number;
  deadline: number | null;
  enqueuedAt: number;
  /** Taken or dropped (for the online lane's arrival list). */
  gone: boolean;
}

/** Compact once this many consumed slots sit before `head`. */
const COMPACT_THRESHOLD = 1024;

/**
 * One lane's queue: an array with a head index (no `Array.shift`, docs/design.md §6.10). The online lane
 * keeps it sorted by deadline (stable: equal deadlines stay in arrival order, no deadline sorts
 * last); insertion is a binary search and almost always an append, since most deadlines are the
 * record timestamp + `delivery.defaultTimeoutMs`.
 */
class LaneQueue<T> {
  private entries: (Entry<T> | undefined)[] = [];
  private head = 0;
  private totalTokens = 0;
  /**
   * The online lane's entries in arrival order (taken and dropped ones are marked `gone` and skipped
   * from the front), so its longest-waiting entry is found without scanning the queue. The backfill
   * lane is in arrival order itself and keeps none.
   */
  private arrivals: Entry<T>[] = [];
  private arrivalHead = 0;
  readonly tokenAt = (i: number): number => this.entries[this.head + i]?.tokens ?? 0;

  /** The i-th queued item (0 ≤ i < size). */
  itemAt(i: number): T {
    return (this.entries[this.head + i] as Entry<T>).item;
  }

  /** Deadline of the i-th queued entry (Infinity for none). */
  deadlineAt(i: number): number {
    return this.entries[this.head + i]?.deadline ?? Number.POSITIVE_INFINITY;
  }

  constructor(private readonly byDeadline: boolean) {}

  get size(): number {
    return this.entries.length - this.head;
  }

  get tokens(): number {
    return this.totalTokens;
  }

  insert(entry: Entry<T>): void {
    this.totalTokens += entry.tokens;
    if (this.byDeadline) this.arrivals.push(entry);
    const key = entry.deadline ?? Number.POSITIVE_INFINITY;
    const last = this.entries[this.entries.length - 1];
    if (!this.byDeadline || this.size === 0 || (last?.deadline ?? Number.POSITIVE_INFINITY) <= key) {
      this.entries.push(entry);
      return;
    }
    let lo = this.head;
    let hi = this.entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.entries[mid]?.deadline ?? Number.POSITIVE_INFINITY) <= key) lo = mid + 1;
      else hi = mid;
    }
    this.entries.splice(lo, 0, entry);
  }

  take(n: number): Entry<T>[] {
    const end = this.head + Math.max(1, Math.min(n, this.size));
    const out = this.entries.slice(this.head, end) as Entry<T>[];
    for (let i = this.head; i < end; i++) this.entries[i] = undefined;
    this.head = end;
    for (const e of out) {
      this.totalTokens -= e.tokens;
      e.gone = true;
    }
    this.compact();
    return out;
  }

  drop(predicate: (item: T) => boolean): number {
    const kept: Entry<T>[] = [];
    for (let i = this.head; i < this.entries.length; i++) {
      const e = this.entries[i] as Entry<T>;
      if (predicate(e.item)) e.gone = true;
      else kept.push(e);
    }
    const dropped = this.size - kept.length;
    if (dropped === 0) return 0;
    this.entries = kept;
    this.head = 0;
    if (kept.length === 0) {
      this.arrivals = [];
      this.arrivalHead = 0;
    }
    this.totalTokens = kept.reduce((n, e) => n + e.tokens, 0);
    return dropped;
  }

  /** Enqueue time of the entry queued longest (the first to arrive of those still queued). */
  private oldestEnqueuedAt(): number | null {
    if (this.size === 0) return null;
    if (!this.byDeadline) return (this.entries[this.head] as Entry<T>).enqueuedAt;
    while ((this.arrivals[this.arrivalHead] as Entry<T>).gone) this.arrivalHead++;
    if (this.arrivalHead >= COMPACT_THRESHOLD && this.arrivalHead * 2 >= this.arrivals.length) {
      this.arrivals = this.arrivals.slice(this.arrivalHead);
      this.arrivalHead = 0;
    }
    return (this.arrivals[this.arrivalHead] as Entry<T>).enqueuedAt;
  }

  state(closing: boolean): QueueState {
    const first = this.entries[this.head];
    return {
      count: this.size,
      tokens: this.totalTokens,
      oldestEnqueuedAtMs: this.oldestEnqueuedAt(),
      // Sorted by deadline: the earliest is the head (null = none has a deadline).
      earliestDeadlineMs: this.byDeadline && first ? first.deadline : null,
      closing,
      tokenAt: this.tokenAt,
    };
  }

  private compact(): void {
    if (this.head === this.entries.length) {
      this.entries = [];
      this.head = 0;
      this.arrivals = [];
      this.arrivalHead = 0;
    } else if (this.head >= COMPACT_THRESHOLD && this.head * 2 >= this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.head = 0;
    }
  }
}

/**
 * The streaming processor's batcher (docs/lanes.md): an online lane ordered by deadline and a backfill
 * lane in arrival order, with `decideLanes` deciding which lane forms the next batch. A batch forms
 * only when it can start (fewer than that lane's slots are out), so formed batches never queue: online
 * batches by the usual rules (docs/batching.md), backfill batches only while no online item waits.
 * Call `done(lane)` when a batch has finished.
 */
export class LaneBatcher<T> {
  private readonly policy: Required<BatchPolicyOptions>;
  private readonly clock: Clock;
  private readonly onBatch: (batch: LaneBatch<T>) => void;
  private readonly slots: Record<Lane, number>;
  private readonly running: Record<Lane, number> = { online: 0, backfill: 0 };
  private readonly online = new LaneQueue<T>(true);
  private readonly backfill = new LaneQueue<T>(false);
  private readonly timer: FlushTimer;
  private closing = false;
  private closed = false;
  private evaluating = false;

  constructor(opts: LaneBatcherOptions<T>) {
    this.policy = {
      maxBatchSize: opts.maxBatchSize,
      maxBatchTokens: opts.maxBatchTokens,
      maxWaitMs: opts.maxWaitMs,
      estimatedInferenceMs: opts.estimatedInferenceMs ?? 0,
    };
    validateBatchPolicyOptions(this.policy, "LaneBatcher");
    this.slots = { online: opts.onlineSlots, backfill: opts.backfillSlots };
    for (const [lane, n] of Object.entries(this.slots))
      if (!Number.isInteger(n) || n < 1)
        throw new RangeError(`LaneBatcher: ${lane}Slots must be an integer ≥ 1, got ${n}`);
    this.clock = opts.clock ?? systemClock;
    this.onBatch = opts.onBatch;
    this.timer = new FlushTimer(this.clock, () => {
      if (!this.closed) this.evaluate();
    });
  }

  /** Items queued in both lanes. */
  get size(): number {
    return this.online.size + this.backfill.size;
  }

  /** Online items queued (not yet in a batch). */
  get onlineSize(): number {
    return this.online.size;
  }

  get backfillSize(): number {
    return this.backfill.size;
  }

  /**
   * The online item at `deadlineMs` would be at this position (0 = next) of the online queue, which
   * is ordered by deadline: how many queued online items run before it.
   */
  onlinePositionOf(deadlineMs: number): number {
    let n = 0;
    // Items ahead = those with an earlier or equal deadline (ties keep arrival order).
    for (let i = 0; i < this.online.size; i++) {
      if (this.online.deadlineAt(i) > deadlineMs) break;
      n++;
    }
    return n;
  }

  /** The least `score` over the queued online items; undefined when none waits. */
  minOnline(score: (item: T) => number): number | undefined {
    let min: number | undefined;
    for (let i = 0; i < this.online.size; i++) {
      const value = score(this.online.itemAt(i));
      if (min === undefined || value < min) min = value;
    }
    return min;
  }

  add(item: T, meta: { lane: Lane; tokens: number; deadlineMs: number | null }): void {
    if (this.closed) throw new Error("LaneBatcher: add() after close(); create a new batcher");
    if (!Number.isFinite(meta.tokens) || meta.tokens < 0)
      throw new RangeError(`LaneBatcher: tokens must be a finite number ≥ 0, got ${String(meta.tokens)}`);
    const entry = {
      item,
      tokens: meta.tokens,
      deadline: meta.deadlineMs,
      enqueuedAt: this.clock.now(),
      gone: false,
    };
    (meta.lane === "online" ? this.online : this.backfill).insert(entry);
    this.evaluate();
  }

  /** A batch of `lane` handed out by `onBatch` has finished: its slot is free again. */
  done(lane: Lane): void {
    this.running[lane] = Math.max(0, this.running[lane] - 1);
    if (!this.closed) this.evaluate();
  }

  /** Removes queued items matching `predicate` from both lanes; returns how many. */
  drop(predicate: (item: T) => boolean): number {
    const dropped = this.online.drop(predicate) + this.backfill.drop(predicate);
    if (dropped > 0 && !this.closed) this.evaluate();
    return dropped;
  }

  /**
   * Backfill batches allowed in flight from now on (the SLO guard, docs/lanes.md); 0 = no new
   * backfill batch forms. Batches already out finish.
   */
  setBackfillSlots(n: number): void {
    if (!Number.isInteger(n) || n < 0)
      throw new RangeError(`LaneBatcher: backfill slots must be an integer ≥ 0, got ${n}`);
    if (n === this.slots.backfill) return;
    this.slots.backfill = n;
    if (this.size > 0 && !this.closed) this.evaluate();
  }

  setEstimatedInferenceMs(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0)
      throw new RangeError(
        `LaneBatcher: estimatedInferenceMs must be a finite number ≥ 0, got ${String(ms)}`,
      );
    this.policy.estimatedInferenceMs = ms;
    if (this.size > 0 && !this.closed) this.evaluate();
  }

  /** Flushes both lanes (reason `shutdown`, online first) and stops the timer. Safe to call twice. */
  close(): void {
    if (this.closed) return;
    this.closing = true;
    this.evaluate();
    this.closed = true;
    this.timer.cancel();
  }

  private evaluate(): void {
    // onBatch may call add() synchronously; the running loop picks the new item up.
    if (this.evaluating) return;
    this.evaluating = true;
    try {
      for (;;) {
        const now = this.clock.now();
        const decision = decideLanes(
          {
            online: this.online.state(this.closing),
            backfill: this.backfill.state(this.closing),
            onlineRunning: this.running.online,
            onlineSlots: this.slots.online,
            backfillRunning: this.running.backfill,
            backfillSlots: this.slots.backfill,
          },
          now,
          this.policy,
        );
        if (!decision.flush) {
          this.timer.schedule(decision.waitMs, now);
          return;
        }
        const queue = decision.lane === "online" ? this.online : this.backfill;
        const entries = queue.take(decision.take);
        this.running[decision.lane]++;
        let tokens = 0;
        for (const e of entries) tokens += e.tokens;
        this.onBatch({
          lane: decision.lane,
          items: entries.map((e) => e.item),
          reason: decision.reason,
          formedAtMs: this.clock.now(),
          enqueuedAtMs: entries.map((e) => e.enqueuedAt),
          tokens,
        });
      }
    } finally {
      this.evaluating = false;
    }
  }
}
