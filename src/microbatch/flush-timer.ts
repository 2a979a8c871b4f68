/** The timer half of a batcher's clock (`Clock` fits). */
export interface TimerClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The one timer of a batcher: replaced only when a rule needs to fire earlier than the one already
 * set; a timer that fires early simply re-evaluates (`onFire`).
 */
export class FlushTimer {
  private handle: unknown = undefined;
  private dueAtMs = Number.POSITIVE_INFINITY;

  constructor(
    private readonly clock: TimerClock,
    private readonly onFire: () => void,
  ) {}

  /** Fire in `waitMs` (from `now`); Infinity cancels. Keeps an earlier or equal timer. */
  schedule(waitMs: number, now: number): void {
    if (!Number.isFinite(waitMs)) {
      this.cancel();
      return;
    }
    const dueAt = now + waitMs;
    if (this.handle !== undefined && this.dueAtMs <= dueAt) return;
    this.cancel();
    this.dueAtMs = dueAt;
    this.handle = this.clock.setTimeout(
      () => {
        this.handle = undefined;
        this.dueAtMs = Number.POSITIVE_INFINITY;
        this.onFire();
      },
      Math.max(0, Math.ceil(waitMs)),
    );
  }

  cancel(): void {
    if (this.handle !== undefined) {
      this.clock.clearTimeout(this.handle);
      this.handle = undefined;
      this.dueAtMs = Number.POSITIVE_INFINITY;
    }
  }
}
