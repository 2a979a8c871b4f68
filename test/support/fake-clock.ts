import type { Clock } from "../../src/time/clock.js";

/** Manual clock: timers fire only when the test advances time. */
export class FakeClock implements Clock {
  nowMs = 1_000;
  private nextId = 1;
  readonly timers = new Map<number, { at: number; fn: () => void }>();
  setCalls = 0;

  now(): number {
    return this.nowMs;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    this.setCalls++;
    const id = this.nextId++;
    this.timers.set(id, { at: this.nowMs + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  advance(ms: number): void {
    const target = this.nowMs + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers)
        if (entry[1].at <= target && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.timers.delete(next[0]);
      this.nowMs = Math.max(this.nowMs, next[1].at);
      next[1].fn();
    }
    this.nowMs = target;
  }
}
