/**
 * Runs jobs with at most `limit` in flight, first in first out (BullMQ's async-fifo-queue idea): the
 * one bounded in-flight runner of the streaming processor and the offline batch job. A job that
 * throws is reported to `onError` and never stops the others.
 */
export interface InFlightRunnerOptions<T> {
  /** Most jobs running at once (>= 1). */
  limit: number;
  run: (job: T) => Promise<void>;
  onError: (error: unknown, job: T) => void;
}

export class InFlightRunner<T> {
  private readonly opts: InFlightRunnerOptions<T>;
  private readonly waiting: T[] = [];
  private head = 0;
  private active = 0;
  private idleWaiters: (() => void)[] = [];

  constructor(options: InFlightRunnerOptions<T>) {
    if (!Number.isInteger(options.limit) || options.limit < 1) {
      throw new RangeError(`InFlightRunner: limit must be an integer >= 1, got ${options.limit}`);
    }
    this.opts = options;
  }

  /** Jobs waiting for a slot. */
  get queued(): number {
    return this.waiting.length - this.head;
  }

  get idle(): boolean {
    return this.active === 0 && this.queued === 0;
  }

  push(job: T): void {
    this.waiting.push(job);
    this.pump();
  }

  /** Resolves once nothing runs or waits. */
  whenIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.active < this.opts.limit && this.queued > 0) {
      const job = this.waiting[this.head++] as T;
      if (this.head === this.waiting.length) {
        this.waiting.length = 0;
        this.head = 0;
      }
      this.active++;
      void this.opts
        .run(job)
        .catch((error) => this.opts.onError(error, job))
        .finally(() => {
          this.active--;
          this.pump();
        });
    }
    if (this.idle && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }
}
