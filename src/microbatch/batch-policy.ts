import type { Lane } from "../contracts/lane.js";
/**
 * The batching policy: a pure function of the queue and the time (docs/design.md §6.7, after Triton's
 * `GetDynamicBatch`). `LaneBatcher` owns the queues and the timer; this decides when to flush and
 * how many items to take.
 *
 * API note: to honour "take only as many as fit" the policy needs per-item token counts, which the
 * aggregate `QueueState` cannot carry; `QueueState.tokenAt(i)` (oldest first) supplies them. Without
 * it the token rule can only flush the whole queue.
 *
 * Rules, checked in this order (the first match names the reason):
 *  1. `closing`                                   → shutdown
 *  2. count ≥ maxBatchSize                        → size
 *  3. tokens ≥ maxBatchTokens                     → tokens
 *  4. earliestDeadline − estimatedInferenceMs ≤ now → deadline (waiting longer would miss it)
 *  5. now − oldestEnqueuedAt ≥ maxWaitMs          → wait
 * `take` is always the longest prefix (in queue order) with ≤ maxBatchSize items and ≤ maxBatchTokens
 * tokens, and at least 1 (a single item above maxBatchTokens goes alone). Otherwise `waitMs` says
 * when the next rule can fire (Infinity for an empty queue: no timer needed).
 */
export type FlushReason = "size" | "tokens" | "wait" | "deadline" | "shutdown" | "fill";

export interface BatchPolicyOptions {
  /** Most items per batch. Positive integer. */
  maxBatchSize: number;
  /** Most tokens (after truncation) per batch; bounds padding and memory. Positive. */
  maxBatchTokens: number;
  /** Longest time the oldest queued item waits for company, ms. 0 = flush at once. */
  maxWaitMs: number;
  /** Expected inference time of a batch, ms, subtracted from deadlines. Default 0. */
  estimatedInferenceMs?: number;
}

export interface QueueState {
  count: number;
  tokens: number;
  /** Enqueue time of the oldest item (epoch ms); null when empty. */
  oldestEnqueuedAtMs: number | null;
  /** Earliest `deadlineMs` among queued items; null when none has one. */
  earliestDeadlineMs: number | null;
  closing: boolean;
  /** Token count of the i-th queued item, 0 = oldest. Optional; see the file comment. */
  tokenAt?: (index: number) => number;
}

export type BatchDecision =
  | { flush: true; reason: FlushReason; take: number }
  | { flush: false; waitMs: number };

export function decideBatch(queue: QueueState, nowMs: number, opts: BatchPolicyOptions): BatchDecision {
  if (queue.count <= 0) {
    return queue.closing ? { flush: false, waitMs: 0 } : { flush: false, waitMs: Number.POSITIVE_INFINITY };
  }
  if (queue.closing) return { flush: true, reason: "shutdown", take: takeCount(queue, opts) };
  if (queue.count >= opts.maxBatchSize) return { flush: true, reason: "size", take: takeCount(queue, opts) };
  if (queue.tokens >= opts.maxBatchTokens)
    return { flush: true, reason: "tokens", take: takeCount(queue, opts) };

  let waitMs = Number.POSITIVE_INFINITY;
  if (queue.earliestDeadlineMs !== null) {
    const untilDeadline = queue.earliestDeadlineMs - (opts.estimatedInferenceMs ?? 0) - nowMs;
    if (untilDeadline <= 0) return { flush: true, reason: "deadline", take: takeCount(queue, opts) };
    waitMs = untilDeadline;
  }
  if (queue.oldestEnqueuedAtMs !== null) {
    const untilWait = queue.oldestEnqueuedAtMs + opts.maxWaitMs - nowMs;
    if (untilWait <= 0) return { flush: true, reason: "wait", take: takeCount(queue, opts) };
    waitMs = Math.min(waitMs, untilWait);
  }
  return { flush: false, waitMs };
}

/** Longest prefix within both limits, at least one item. */
function takeCount(queue: QueueState, opts: BatchPolicyOptions): number {
  const maxItems = Math.min(queue.count, opts.maxBatchSize);
  if (queue.tokens <= opts.maxBatchTokens || queue.tokenAt === undefined) return maxItems;
  let sum = 0;
  for (let i = 0; i < maxItems; i++) {
    sum += queue.tokenAt(i);
    if (sum > opts.maxBatchTokens) return Math.max(1, i);
  }
  return maxItems;
}

/** Throws a RangeError naming the bad field; components call this once at construction. */
export function validateBatchPolicyOptions(opts: BatchPolicyOptions, component = "batching"): void {
  if (!Number.isInteger(opts.maxBatchSize) || opts.maxBatchSize < 1) {
    throw new RangeError(
      `${component}: maxBatchSize must be an integer ≥ 1, got ${String(opts.maxBatchSize)}`,
    );
  }
  if (!Number.isFinite(opts.maxBatchTokens) || opts.maxBatchTokens < 1) {
    throw new RangeError(
      `${component}: maxBatchTokens must be a number ≥ 1, got ${String(opts.maxBatchTokens)}`,
    );
  }
  if (!Number.isFinite(opts.maxWaitMs) || opts.maxWaitMs < 0) {
    throw new RangeError(
      `${component}: maxWaitMs must be a finite number ≥ 0, got ${String(opts.maxWaitMs)}`,
    );
  }
  const est = opts.estimatedInferenceMs;
  if (est !== undefined && (!Number.isFinite(est) || est < 0)) {
    throw new RangeError(
      `${component}: estimatedInferenceMs must be a finite number ≥ 0, got ${String(est)}`,
    );
  }
}

export interface LaneQueueState {
  /** The online lane, in dispatch order: earliest deadline first (`tokenAt(0)` is the earliest). */
  online: QueueState;
  /** The backfill lane, in arrival order. Its deadlines and wait times play no part. */
  backfill: QueueState;
  /** Online batches handed out and not finished yet, and the most that may be. */
  onlineRunning: number;
  onlineSlots: number;
  /** Backfill batches handed out and not finished yet. */
  backfillRunning: number;
  /** Most backfill batches out at once (the processor uses `batching.maxInFlightBatches`). */
  backfillSlots: number;
}

export type LaneDecision =
  | { flush: true; lane: Lane; reason: FlushReason; take: number }
  | { flush: false; waitMs: number };

/**
 * Priority between the lanes, a pure function like `decideBatch` (docs/design.md §6.7, §6.19: priority
 * levels as separate queues served in order, after Triton's `priority_levels`):
 *  1. the online lane's rules (`decideBatch`: shutdown, size, tokens, deadline, wait) come first,
 *     once an online slot is free (a batch forms when it can start, so it keeps filling while it
 *     waits and its items are the earliest deadlines at that moment); the queue is ordered by
 *     deadline, so the prefix taken is the earliest deadlines;
 *  2. a closing backfill lane flushes (`shutdown`);
 *  3. backfill fills the model (`fill`) only while no online item waits for the model (none is
 *     queued, or the queued ones only wait for company with an online slot free) and a backfill slot
 *     is free: it never forms batches ahead of time, so an online item never waits behind backfill
 *     work that has not started (once handed out, the model runs backfill calls only while no online
 *     call is queued: `ModelPort.run`'s `lane`);
 *  4. otherwise wait for the online lane's next rule (Infinity: re-evaluated when an item arrives or
 *     a backfill batch finishes).
 * A backfill batch takes the longest arrival-order prefix within maxBatchSize and maxBatchTokens.
 */
export function decideLanes(q: LaneQueueState, nowMs: number, opts: BatchPolicyOptions): LaneDecision {
  const slotFree = q.onlineRunning < q.onlineSlots || q.online.closing;
  const online = slotFree ? decideBatch(q.online, nowMs, opts) : { flush: false as const, waitMs: Infinity };
  if (online.flush) return { ...online, lane: "online" };
  if (q.backfill.count > 0) {
    if (q.backfill.closing)
      return { flush: true, lane: "backfill", reason: "shutdown", take: takeCount(q.backfill, opts) };
    // Online items waiting only for company (a slot is free, so their batch starts once it forms) do
    // not hold backfill back: the model would idle, and the online batch then waits for at most the
    // one backfill slice running (the worker pool serves online calls first). Online items waiting
    // for a slot do: the model is busy with online work.
    if ((q.online.count === 0 || slotFree) && q.backfillRunning < q.backfillSlots)
      return { flush: true, lane: "backfill", reason: "fill", take: takeCount(q.backfill, opts) };
  }
  return online;
}
