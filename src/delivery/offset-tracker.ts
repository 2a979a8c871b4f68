import { type OffsetOrder, offsetOrder, offsetText, orderAfter } from "../contracts/offset-order.js";

/**
 * Tracks the records of one input partition from delivery to completion and hands out the
 * contiguous completed prefix: the only part whose outputs and `offset + 1` may be committed
 * together. Committing a completed record that sits behind an unfinished one would make a crash
 * replay it (a second result or dead letter), so outputs are held back until the prefix reaches them.
 *
 * Offsets are tracked in delivery order, not by `+1` arithmetic, because transactional input topics
 * have gaps (commit/abort markers occupy offsets that are never delivered).
 */
export interface CommittableRange<T> {
  /** Next offset to consume: last offset of the prefix + 1 (what `sendOffsets` wants). */
  nextOffset: string;
  /** Completion payloads in offset order, one per record of the prefix. */
  completions: T[];
  /** Offsets of those records, same order (a dead letter names its source offset by them). */
  offsets: string[];
  /** True when a limit cut the slice: more completed records were ready behind it. */
  capped: boolean;
}

/** Caps one `takeCommittable` slice; it always holds at least one record. */
export interface CommittableLimit {
  maxRecords: number;
  /** Against the sum of the `bytes` the slice's records were completed with. */
  maxBytes: number;
}

interface Slot<T> {
  /** The offset as delivered (decimal), handed back as it is. */
  offset: string;
  /** Its value for ordering (contracts/offset-order.ts). */
  order: OffsetOrder;
  done: boolean;
  completion: T | undefined;
  /** The completion's size as `complete` was told it (counted once, not per slice attempt). */
  bytes: number;
}

/**
 * Per record, on the processor's main thread: no `Map` and no bigint parsing. Slots sit in delivery
 * order, so a completion finds its slot from a cursor that follows the completions (they arrive
 * nearly in order) or by binary search; offsets are compared by their order values (numbers, bigints
 * only past 2^53).
 */
export class OffsetTracker<T> {
  private slots: Slot<T>[] = [];
  private head = 0;
  /** Where the last completion was found, + 1: the next one is usually there. */
  private cursor = 0;
  private lastTracked: OffsetOrder | undefined;

  /** Records delivered but not yet handed out by `takeCommittable`. */
  get size(): number {
    return this.slots.length - this.head;
  }

  /** Registers a delivered record. Offsets must strictly increase (Kafka delivers them so). */
  track(offset: string): void {
    const order = offsetOrder(offset);
    if (this.lastTracked !== undefined && order <= this.lastTracked) {
      throw new Error(
        `OffsetTracker: offset ${offset} is not above the last tracked offset ${this.lastTracked}; reset() the tracker before re-reading a partition`,
      );
    }
    this.slots.push({ offset, order, done: false, completion: undefined, bytes: 0 });
    this.lastTracked = order;
  }

  /**
   * Marks a tracked record finished with its completion payload and its size in bytes (what
   * `takeCommittable`'s maxBytes counts). Returns false for unknown offsets.
   */
  complete(offset: string, completion: T, bytes = 0): boolean {
    const slot = this.find(offset);
    if (slot === undefined || slot.done) return false;
    slot.done = true;
    slot.completion = completion;
    slot.bytes = bytes;
    return true;
  }

  /** The untaken slot of `offset`: at the cursor, else by binary search over the untaken slots. */
  private find(offset: string): Slot<T> | undefined {
    const slots = this.slots;
    const at = slots[this.cursor];
    if (at !== undefined && this.cursor >= this.head && at.offset === offset) {
      this.cursor++;
      return at;
    }
    const order = offsetOrder(offset);
    let lo = this.head;
    let hi = slots.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const slot = slots[mid] as Slot<T>;
      if (slot.order < order) lo = mid + 1;
      else if (slot.order > order) hi = mid - 1;
      else {
        this.cursor = mid + 1;
        return slot;
      }
    }
    return undefined;
  }

  /**
   * Removes and returns the contiguous completed prefix, or undefined when it is empty. With `limit`
   * only its first records (at least one) up to maxRecords / maxBytes; the rest stays for the next call.
   */
  takeCommittable(limit?: CommittableLimit): CommittableRange<T> | undefined {
    const slots = this.slots;
    const completions: T[] = [];
    const offsets: string[] = [];
    let end = this.head;
    let bytes = 0;
    let capped = false;
    for (let slot = slots[end]; slot?.done; slot = slots[++end]) {
      if (limit) {
        const n = end - this.head;
        if (n > 0 && (n >= limit.maxRecords || bytes + slot.bytes > limit.maxBytes)) {
          capped = true;
          break;
        }
        bytes += slot.bytes;
      }
      completions.push(slot.completion as T);
      offsets.push(slot.offset);
    }
    if (end === this.head) return undefined;
    const last = slots[end - 1] as Slot<T>;
    this.head = end;
    // Compact occasionally instead of Array.shift per record (docs/design.md §6.10).
    if (this.head > 1024 && this.head * 2 > slots.length) {
      this.slots = slots.slice(this.head);
      this.cursor = Math.max(0, this.cursor - this.head);
      this.head = 0;
    }
    return { nextOffset: nextOffset(last), completions, offsets, capped };
  }

  /** Completion payloads of the records completed and not handed out yet (behind a gap, or not taken). */
  completedNotTaken(): T[] {
    const out: T[] = [];
    for (let i = this.head; i < this.slots.length; i++) {
      const slot = this.slots[i] as Slot<T>;
      if (slot.done) out.push(slot.completion as T);
    }
    return out;
  }

  /** Forgets everything (after a seek back to the committed offset). */
  reset(): void {
    this.slots = [];
    this.head = 0;
    this.cursor = 0;
    this.lastTracked = undefined;
  }
}

/** The offset after `slot`'s, decimal. */
function nextOffset(slot: Slot<unknown>): string {
  return offsetText(orderAfter(slot.order));
}
