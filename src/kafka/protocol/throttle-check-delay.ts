import { kafkajsModule } from "./kafkajs-module.js";

/**
 * kafkajs 2.2.4's request queue schedules a check of its pending requests for when the broker's
 * throttle ends (`src/network/requestQueue/index.js`, `scheduleCheckPendingRequests`). Nothing is
 * throttled most of the time: `throttledUntil` is -1, and with no request pending the timer's delay
 * is `-1 - Date.now()`. Node.js has always run such a timer after 1 ms; Node.js 24 (the image's
 * runtime) also prints a `TimeoutNegativeWarning` for it, a line outside the JSON logs of every
 * process that connects.
 *
 * The correction: the same method, the same timer, with its delay at least 1 ms, which is what
 * Node.js makes of a smaller one. Nothing else changes. Where: the method on kafkajs's RequestQueue
 * class (its prototype, shared by every connection). Applied once per process by `createKafka`; see
 * test/unit/kafka/protocol/throttle-check-delay.test.ts.
 */
const WRAPPED = Symbol.for("sluice.kafkajs.throttleCheckDelay");
/** kafkajs's own interval for a pending request whose throttle has already ended, ms. */
const CHECK_PENDING_REQUESTS_INTERVAL = 10;

/** The parts of kafkajs's RequestQueue that its `scheduleCheckPendingRequests` uses. */
interface RequestQueue {
  throttledUntil: number;
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  pending: unknown[];
  checkPendingRequests(): void;
}

interface RequestQueuePrototype {
  scheduleCheckPendingRequests(this: RequestQueue): void;
  [WRAPPED]?: true;
}

export function fixThrottleCheckDelay(): void {
  const RequestQueueClass = kafkajsModule<{ prototype: RequestQueuePrototype }>(
    "network",
    "requestQueue",
    "index.js",
  );
  const proto = RequestQueueClass.prototype;
  if (proto[WRAPPED]) return;
  proto.scheduleCheckPendingRequests = function (this: RequestQueue) {
    let scheduleAt = this.throttledUntil - Date.now();
    if (this.throttleCheckTimeoutId) return;
    if (this.pending.length > 0) scheduleAt = scheduleAt > 0 ? scheduleAt : CHECK_PENDING_REQUESTS_INTERVAL;
    this.throttleCheckTimeoutId = setTimeout(
      () => {
        this.throttleCheckTimeoutId = null;
        this.checkPendingRequests();
      },
      Math.max(1, scheduleAt),
    );
  };
  proto[WRAPPED] = true;
}
