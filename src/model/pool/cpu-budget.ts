/**
 * The backfill lane's CPU budget in the worker pool (docs/lanes.md, "The CPU budget"): a token
 * bucket of CPU milliseconds that fills at `cores` ms per ms of wall time, up to `burstMs`, and that
 * every backfill call's measured CPU (its worker thread and ORT pool, thread-cpu-clock.ts) drains
 * when the call answers. A backfill call may start only while the balance is not negative, so over
 * any stretch of time the backfill calls use at most `cores` × the stretch + `burstMs` + the calls
 * already running when the balance ran out, whatever the kernel's scheduler does with priorities.
 * Pure: the caller passes the time (performance.now() in the pool, a fake clock in tests).
 */
export class CpuBudget {
  private balanceMs: number;
  private coresValue = Number.POSITIVE_INFINITY;
  private at: number;

  /**
   * @param burstMs the most CPU-ms the bucket saves up while backfill is idle (so a lane that just
   *   started runs its first calls at once, and a long idle stretch is not a licence to burst).
   */
  constructor(
    now: number,
    private readonly burstMs = DEFAULT_BURST_MS,
  ) {
    this.balanceMs = burstMs;
    this.at = now;
  }

  /** Cores the backfill calls may use now; Infinity = no budget (every call may start). */
  get cores(): number {
    return this.coresValue;
  }

  /** A new rate from `now` on: what was earned at the old rate stays. */
  setCores(cores: number, now: number): void {
    this.settle(now);
    this.coresValue = Math.max(0, cores);
  }

  /** A backfill call answered after using `cpuMs` of CPU. */
  charge(cpuMs: number, now: number): void {
    this.settle(now);
    if (Number.isFinite(cpuMs) && cpuMs > 0) this.balanceMs -= cpuMs;
  }

  /** When the next backfill call may start: `now` while the balance is not negative; Infinity at 0 cores. */
  readyAt(now: number): number {
    if (this.coresValue === Number.POSITIVE_INFINITY) return now;
    this.settle(now);
    if (this.balanceMs >= 0) return now;
    if (this.coresValue === 0) return Number.POSITIVE_INFINITY;
    return now + -this.balanceMs / this.coresValue;
  }

  private settle(now: number): void {
    const elapsed = Math.max(0, now - this.at);
    this.at = Math.max(this.at, now);
    if (this.coresValue === Number.POSITIVE_INFINITY) {
      this.balanceMs = this.burstMs;
      return;
    }
    this.balanceMs = Math.min(this.burstMs, this.balanceMs + elapsed * this.coresValue);
  }
}

/** The bucket's size: 100 ms of CPU, about five default backfill slices (`model.backfillSliceMs` 20). */
export const DEFAULT_BURST_MS = 100;
