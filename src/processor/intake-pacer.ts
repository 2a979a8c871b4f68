import type { Lane } from "../contracts/lane.js";
import type { FetchedRecord } from "./processor-ports.js";

/** What the pacer needs of a partition task. */
export interface PacedTask {
  readonly lane: Lane;
  readonly generation: number;
  readonly running: boolean;
}

export interface IntakePacerOptions<T extends PacedTask> {
  /** Takes one accepted record into the processor (decode, dedup, tokens, batcher). */
  take(task: T, record: FetchedRecord): void;
  /** After records are accepted and after each slice of takes: the flow control's look at the queue bounds. */
  afterSlice(): void;
  /** Longest run of backfill takes in one turn of the event loop, ms. */
  sliceMs?: number;
  /** Monotonic ms; a seam for tests. */
  now?: () => number;
  /** Runs `fn` on a later turn of the event loop (setImmediate); a seam for tests. */
  defer?: (fn: () => void) => void;
}

/**
 * The longest run of backfill intake in one turn of the event loop: measured, one backfill fetch of
 * paragraphs (107–532 records) took up to 119 ms to take on the main thread at once (decode and the
 * tokenizer's count, 0.28 ms a record on average), and the online requests fetched beside it waited for all of
 * it: the online tail of a backfill's first seconds (docs/lanes.md, "Intake in slices").
 */
export const INTAKE_SLICE_MS = 5;

/**
 * Takes accepted records into the processor without holding the event loop (docs/lanes.md, "Intake
 * in slices"). Online records are taken at once, as they arrive. A backfill fetch is queued behind its
 * partition's earlier records and taken in slices of at most `sliceMs`, one slice per turn of the event
 * loop, round-robin over the partitions with records waiting, so the online lane's fetches, the
 * workers' answers and the commits run between slices. Per partition the order is the fetch order.
 * The records were accepted (their offsets tracked, counted against `batching.maxQueuedRecords`);
 * a task whose generation changed (fenced, reset, revoked) or that stopped running drops what it
 * still had waiting: nothing of it was committed, so the partition's next owner fetches it again.
 */
export class IntakePacer<T extends PacedTask> {
  private readonly waiting = new Map<T, { generation: number; records: FetchedRecord[]; next: number }>();
  private scheduled = false;
  private readonly sliceMs: number;
  private readonly now: () => number;
  private readonly defer: (fn: () => void) => void;

  constructor(private readonly opts: IntakePacerOptions<T>) {
    this.sliceMs = opts.sliceMs ?? INTAKE_SLICE_MS;
    this.now = opts.now ?? (() => performance.now());
    this.defer = opts.defer ?? ((fn) => setImmediate(fn));
  }

  /** Records of `task` accepted at `task.generation`, in fetch order. */
  add(task: T, records: readonly FetchedRecord[]): void {
    if (records.length === 0) return;
    if (task.lane === "online") {
      for (const r of records) this.opts.take(task, r);
      this.opts.afterSlice();
      return;
    }
    const queue = this.waiting.get(task);
    // Records already taken are dropped from the queue as it grows, so they are not held in memory.
    if (queue !== undefined && queue.generation === task.generation)
      this.waiting.set(task, { ...queue, records: queue.records.slice(queue.next).concat(records), next: 0 });
    else this.waiting.set(task, { generation: task.generation, records: [...records], next: 0 });
    // Accepted records count against the queue bound already: the flow control looks at once.
    this.opts.afterSlice();
    this.schedule();
  }

  /** Backfill records accepted and not taken yet. */
  get waitingRecords(): number {
    let n = 0;
    for (const q of this.waiting.values()) n += q.records.length - q.next;
    return n;
  }

  private schedule(): void {
    if (this.scheduled || this.waiting.size === 0) return;
    this.scheduled = true;
    this.defer(() => {
      this.scheduled = false;
      this.slice();
      this.schedule();
    });
  }

  /** One slice: round-robin over the partitions with records waiting, until sliceMs has passed. */
  private slice(): void {
    const until = this.now() + this.sliceMs;
    let took = false;
    while (this.waiting.size > 0 && (!took || this.now() < until)) {
      for (const [task, queue] of this.waiting) {
        if (queue.generation !== task.generation || !task.running) {
          this.waiting.delete(task);
          continue;
        }
        this.opts.take(task, queue.records[queue.next++] as FetchedRecord);
        took = true;
        if (queue.next >= queue.records.length) this.waiting.delete(task);
        if (this.now() >= until) break;
      }
    }
    if (took) this.opts.afterSlice();
  }
}
