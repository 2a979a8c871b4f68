import { afterEach, describe, expect, it, vi } from "vitest";
import { kafkajsModule } from "../../../../src/kafka/protocol/kafkajs-module.js";
import { fixThrottleCheckDelay } from "../../../../src/kafka/protocol/throttle-check-delay.js";

// kafkajs's own RequestQueue (the class every connection uses), with the correction applied: an
// unthrottled queue with nothing pending schedules its check after 1 ms, not after -1 - Date.now()
// (Node.js 24 warns of a negative delay); a throttled one waits for the throttle's end; a pending
// request past its throttle is checked after kafkajs's 10 ms; one check at a time.

type Queue = {
  throttledUntil: number;
  throttleCheckTimeoutId: unknown;
  pending: unknown[];
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
};
const RequestQueue = kafkajsModule<new (options: Record<string, unknown>) => Queue>(
  "network",
  "requestQueue",
  "index.js",
);
const silent = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

function queue(): Queue {
  const q = new RequestQueue({
    maxInFlightRequests: 1,
    requestTimeout: 1000,
    clientId: "t",
    broker: "b",
    logger: silent,
  });
  q.checkPendingRequests = vi.fn();
  return q;
}

describe("kafkajs's throttle check delay", () => {
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  it("schedules its checks with a delay of at least 1 ms, kafkajs's otherwise", () => {
    fixThrottleCheckDelay();
    vi.useFakeTimers({ now: 1_800_000_000_000 });
    const delays: number[] = [];
    const real = globalThis.setTimeout;
    vi.spyOn(globalThis, "setTimeout").mockImplementation(((fn: () => void, ms?: number) => {
      delays.push(ms ?? Number.NaN);
      return real(fn, ms);
    }) as typeof setTimeout);

    const idle = queue();
    idle.scheduleCheckPendingRequests();
    expect(delays).toEqual([1]);
    idle.scheduleCheckPendingRequests(); // one check at a time
    expect(delays).toEqual([1]);
    vi.advanceTimersByTime(1);
    expect(idle.checkPendingRequests).toHaveBeenCalledTimes(1);

    const throttled = queue();
    throttled.throttledUntil = Date.now() + 250;
    throttled.scheduleCheckPendingRequests();
    const waiting = queue();
    waiting.pending.push({});
    waiting.scheduleCheckPendingRequests();
    expect(delays).toEqual([1, 250, 10]);
  });
});
