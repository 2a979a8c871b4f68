import { describe, expect, it } from "vitest";
import {
  type BatchDecision,
  type BatchPolicyOptions,
  decideBatch,
  type QueueState,
  validateBatchPolicyOptions,
} from "../../../src/microbatch/batch-policy.js";

const opts: BatchPolicyOptions = {
  maxBatchSize: 4,
  maxBatchTokens: 100,
  maxWaitMs: 10,
  estimatedInferenceMs: 5,
};

/** Queue of items with the given token counts, oldest enqueued at `oldest`. */
function queue(tokens: number[], extra: Partial<QueueState> = {}): QueueState {
  return {
    count: tokens.length,
    tokens: tokens.reduce((a, b) => a + b, 0),
    oldestEnqueuedAtMs: tokens.length > 0 ? 1000 : null,
    earliestDeadlineMs: null,
    closing: false,
    tokenAt: (i) => tokens[i] ?? 0,
    ...extra,
  };
}

const cases: {
  name: string;
  q: QueueState;
  now: number;
  o?: Partial<BatchPolicyOptions>;
  want: BatchDecision;
}[] = [
  { name: "empty queue: no timer", q: queue([]), now: 1000, want: { flush: false, waitMs: Infinity } },
  {
    name: "empty queue while closing: nothing to flush",
    q: queue([], { closing: true }),
    now: 1000,
    want: { flush: false, waitMs: 0 },
  },
  {
    name: "one item, fresh: wait the rest of maxWaitMs",
    q: queue([10]),
    now: 1003,
    want: { flush: false, waitMs: 7 },
  },
  {
    name: "one item at maxWaitMs exactly: wait flush",
    q: queue([10]),
    now: 1010,
    want: { flush: true, reason: "wait", take: 1 },
  },
  {
    name: "one item past maxWaitMs: wait flush",
    q: queue([10]),
    now: 1050,
    want: { flush: true, reason: "wait", take: 1 },
  },
  {
    name: "maxWaitMs 0 flushes at once",
    q: queue([10]),
    now: 1000,
    o: { maxWaitMs: 0 },
    want: { flush: true, reason: "wait", take: 1 },
  },
  {
    name: "count reaches maxBatchSize: size",
    q: queue([1, 1, 1, 1]),
    now: 1000,
    want: { flush: true, reason: "size", take: 4 },
  },
  {
    name: "count above maxBatchSize: take maxBatchSize",
    q: queue([1, 1, 1, 1, 1, 1]),
    now: 1000,
    want: { flush: true, reason: "size", take: 4 },
  },
  {
    name: "tokens exactly maxBatchTokens: take all",
    q: queue([50, 50]),
    now: 1000,
    want: { flush: true, reason: "tokens", take: 2 },
  },
  {
    name: "tokens above limit: take the prefix that fits",
    q: queue([40, 40, 40]),
    now: 1000,
    want: { flush: true, reason: "tokens", take: 2 },
  },
  {
    name: "single oversized item goes alone",
    q: queue([500]),
    now: 1000,
    want: { flush: true, reason: "tokens", take: 1 },
  },
  {
    name: "oversized item behind small ones: small ones first",
    q: queue([10, 500]),
    now: 1000,
    want: { flush: true, reason: "tokens", take: 1 },
  },
  {
    name: "size wins over tokens, take bounded by both",
    q: queue([30, 30, 30, 30, 30]),
    now: 1000,
    want: { flush: true, reason: "size", take: 3 },
  },
  {
    name: "without tokenAt the token rule takes everything up to size",
    q: queue([40, 40, 40], { tokenAt: undefined }),
    now: 1000,
    want: { flush: true, reason: "tokens", take: 3 },
  },
  {
    name: "deadline far away: wait is bounded by maxWaitMs",
    q: queue([1], { earliestDeadlineMs: 5000 }),
    now: 1002,
    want: { flush: false, waitMs: 8 },
  },
  {
    name: "deadline closer than maxWaitMs: wait until deadline − estimate",
    q: queue([1], { earliestDeadlineMs: 1009 }),
    now: 1002,
    want: { flush: false, waitMs: 2 },
  },
  {
    name: "deadline − estimate reached: deadline flush",
    q: queue([1], { earliestDeadlineMs: 1009 }),
    now: 1004,
    want: { flush: true, reason: "deadline", take: 1 },
  },
  {
    name: "deadline already passed: deadline flush",
    q: queue([1, 1], { earliestDeadlineMs: 900 }),
    now: 1001,
    want: { flush: true, reason: "deadline", take: 2 },
  },
  {
    name: "estimate defaults to 0",
    q: queue([1], { earliestDeadlineMs: 1005 }),
    now: 1004,
    o: { estimatedInferenceMs: undefined },
    want: { flush: false, waitMs: 1 },
  },
  {
    name: "deadline beats wait when both due",
    q: queue([1], { earliestDeadlineMs: 1000 }),
    now: 1020,
    want: { flush: true, reason: "deadline", take: 1 },
  },
  {
    name: "closing flushes a fresh queue: shutdown",
    q: queue([1, 1], { closing: true }),
    now: 1000,
    want: { flush: true, reason: "shutdown", take: 2 },
  },
  {
    name: "closing still respects limits",
    q: queue([1, 1, 1, 1, 1], { closing: true }),
    now: 1000,
    want: { flush: true, reason: "shutdown", take: 4 },
  },
  {
    name: "closing beats size",
    q: queue([1, 1, 1, 1], { closing: true }),
    now: 1000,
    want: { flush: true, reason: "shutdown", take: 4 },
  },
];

describe("decideBatch", () => {
  it.each(cases)("$name", ({ q, now, o, want }) => {
    expect(decideBatch(q, now, { ...opts, ...o })).toEqual(want);
  });

  it("is pure: same input, same output, queue untouched", () => {
    const q = queue([40, 40, 40]);
    const snapshot = { ...q };
    const a = decideBatch(q, 1000, opts);
    const b = decideBatch(q, 1000, opts);
    expect(a).toEqual(b);
    expect(q).toEqual(snapshot);
  });

  it("never asks to flush zero items and never takes more than the queue holds", () => {
    for (let count = 1; count <= 8; count++) {
      for (const tok of [1, 30, 99, 150]) {
        const tokens = Array.from({ length: count }, () => tok);
        for (const closing of [false, true]) {
          const d = decideBatch(queue(tokens, { closing }), 1000, opts);
          if (d.flush) {
            expect(d.take).toBeGreaterThanOrEqual(1);
            expect(d.take).toBeLessThanOrEqual(Math.min(count, opts.maxBatchSize));
            const taken = tokens.slice(0, d.take).reduce((a, b) => a + b, 0);
            if (d.take > 1) expect(taken).toBeLessThanOrEqual(opts.maxBatchTokens);
          }
        }
      }
    }
  });
});

describe("validateBatchPolicyOptions", () => {
  it.each([
    [{ maxBatchSize: 0 }, /maxBatchSize/],
    [{ maxBatchSize: 1.5 }, /maxBatchSize/],
    [{ maxBatchTokens: 0 }, /maxBatchTokens/],
    [{ maxWaitMs: -1 }, /maxWaitMs/],
    [{ maxWaitMs: Number.NaN }, /maxWaitMs/],
    [{ estimatedInferenceMs: -3 }, /estimatedInferenceMs/],
  ])("rejects %o", (bad, pattern) => {
    expect(() => validateBatchPolicyOptions({ ...opts, ...bad })).toThrow(pattern);
  });

  it("accepts sane options", () => {
    expect(() => validateBatchPolicyOptions(opts)).not.toThrow();
  });
});
