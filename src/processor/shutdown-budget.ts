/**
 * The time a graceful stop may take (`shutdown.timeoutMs`), from the moment it starts. Finishing
 * in-flight work may use it up to a reserve kept for the final commits and leaving the group; those
 * may use the rest. Whatever does not finish in time is left to the partitions' next owner: its
 * offsets are not committed, so nothing is lost and nothing is doubled.
 */
export class ShutdownBudget {
  /** The whole budget, ms (Infinity: unbounded). */
  readonly timeoutMs: number;
  private readonly deadlineMs: number;
  private readonly now: () => number;

  constructor(timeoutMs: number = Number.POSITIVE_INFINITY, now: () => number = Date.now) {
    if (!(timeoutMs > 0)) throw new RangeError(`ShutdownBudget: timeoutMs must be > 0, got ${timeoutMs}`);
    this.timeoutMs = timeoutMs;
    this.now = now;
    this.deadlineMs = now() + timeoutMs;
  }

  /** Kept at the end for final commits and leaving the group: a quarter of the budget, at most 5 s. */
  get reserveMs(): number {
    return Math.min(5000, this.timeoutMs / 4);
  }

  /** Time left, ms; with `keepReserve`, the time left before the reserve starts. */
  remainingMs(keepReserve = false): number {
    const left = this.deadlineMs - this.now() - (keepReserve ? this.reserveMs : 0);
    return Math.max(0, left);
  }

  /**
   * Waits for `work` while time is left (`keepReserve`: before the reserve). Resolves true when it
   * finished in time, false when the budget ran out first (the work goes on; its outcome is then
   * not waited for). A rejection of `work` counts as finished.
   */
  async waitFor(work: Promise<unknown>, keepReserve = false): Promise<boolean> {
    const settled = work.then(
      () => true,
      () => true,
    );
    const ms = this.remainingMs(keepReserve);
    if (!Number.isFinite(ms)) return settled;
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    try {
      return await Promise.race([settled, expired]);
    } finally {
      clearTimeout(timer);
    }
  }
}
