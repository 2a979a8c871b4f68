/**
 * Durations observed in the last `windowMs`: each sample is (time it ended, duration), so
 * `time − duration` is when it started. Bounded:
 * at most `maxSamples` are kept (the newest), so a burst of thousands of commits costs a bounded
 * sort per read. Pure; the caller passes the time.
 */
export class LatencyWindow {
  private times: number[] = [];
  private values: number[] = [];
  private head = 0;

  constructor(
    private readonly windowMs: number,
    private readonly maxSamples = 4096,
  ) {}

  add(nowMs: number, value: number): void {
    this.times.push(nowMs);
    this.values.push(value);
    if (this.times.length - this.head > this.maxSamples) this.head++;
    this.compact();
  }

  /** Samples in the window ending at `nowMs`. */
  count(nowMs: number): number {
    this.prune(nowMs);
    return this.times.length - this.head;
  }

  /**
   * The `q` quantile (nearest rank) of the samples in the window ending at `nowMs`, optionally only
   * those that started at or after `startedSinceMs`; undefined when there are none.
   */
  quantile(q: number, nowMs: number, startedSinceMs = Number.NEGATIVE_INFINITY): number | undefined {
    this.prune(nowMs);
    const picked: number[] = [];
    for (let i = this.head; i < this.times.length; i++) {
      const value = this.values[i] as number;
      if ((this.times[i] as number) - value >= startedSinceMs) picked.push(value);
    }
    if (picked.length === 0) return undefined;
    picked.sort((a, b) => a - b);
    const rank = Math.min(picked.length - 1, Math.max(0, Math.ceil(q * picked.length) - 1));
    return picked[rank];
  }

  /** Sum of the values in the window ending at `nowMs`. */
  sum(nowMs: number): number {
    this.prune(nowMs);
    let s = 0;
    for (let i = this.head; i < this.values.length; i++) s += this.values[i] as number;
    return s;
  }

  private prune(nowMs: number): void {
    const oldest = nowMs - this.windowMs;
    while (this.head < this.times.length && (this.times[this.head] as number) < oldest) this.head++;
    this.compact();
  }

  /** No `Array.shift` on a hot queue (docs/design.md §6.10): drop the consumed prefix now and then. */
  private compact(): void {
    if (this.head === this.times.length) {
      this.times = [];
      this.values = [];
      this.head = 0;
    } else if (this.head > 256 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.values = this.values.slice(this.head);
      this.head = 0;
    }
  }
}
