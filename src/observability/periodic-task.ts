/**
 * Runs an async job now and then every `intervalMs`, never overlapping: the next run is scheduled
 * after the previous one ends. A failed run is reported to `onError` and the schedule goes on.
 * Shared by the lag monitor and the freshness heartbeat.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly job: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  get isRunning(): boolean {
    return this.running;
  }

  /** Starts the schedule (first run immediately). Calling it while running does nothing. */
  start(): void {
    if (this.running) return;
    this.running = true;
    const loop = async () => {
      if (!this.running) return;
      try {
        await this.job();
      } catch (err) {
        this.onError(err);
      }
      if (this.running) this.timer = setTimeout(loop, this.intervalMs);
    };
    void loop();
  }

  /** Stops scheduling; a run in progress finishes on its own (callers await their own job). */
  stop(): void {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
