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
  offset: bigint;
  done: boolean;
  completion: T | undefined;
  /** The completion's size as `complete` was told it (counted once, not per slice attempt). */
  bytes: number;
}

export class OffsetTracker<T> {
  private slots: Slot<T>[] = [];
  private head = 0;
  private readonly byOffset = new Map<bigint, Slot<T>>();
  private lastTracked: bigint | undefined;

  /** Records delivered but not yet handed out by `takeCommittable`. */
  get size(): number {
    return this.slots.length - this.head;
  }

  /** Registers a delivered record. Offsets must strictly increase (Kafka delivers them so). */
  track(offset: string): void {
    const o = BigInt(offset);
    if (this.lastTracked !== undefined && o <= this.lastTracked) {
      throw new Error(
        `OffsetTracker: offset ${offset} is not above the last tracked offset ${this.lastTracked}; reset() the tracker before re-reading a partition`,
      );
    }
    const slot: Slot<T> = { offset: o, done: false, completion: undefined, bytes: 0 };
    this.slots.push(slot);
    this.byOffset.set(o, slot);
    this.lastTracked = o;
  }

  /**
   * Marks a tracked record finished with its completion payload and its size in bytes (what
   * `takeCommittable`'s maxBytes counts). Returns false for unknown offsets.
   */
  complete(offset: string, completion: T, bytes = 0): boolean {
    const slot = this.byOffset.get(BigInt(offset));
    if (slot === undefined || slot.done) return false;
    slot.done = true;
    slot.completion = completion;
    slot.bytes = bytes;
    return true;
  }

  /**
   * Removes and returns the contiguous completed prefix, or undefined when it is empty. With `limit`
   * only its first records (at least one) up to maxRecords / maxBytes; the rest stays for the next call.
   */
  takeCommittable(limit?: CommittableLimit): CommittableRange<T> | undefined {
    let end = this.head;
    let bytes = 0;
    let capped = false;
    while (end < this.slots.length && this.slots[end]?.done) {
      if (limit) {
        const n = end - this.head;
        const size = (this.slots[end] as Slot<T>).bytes;
        if (n > 0 && (n >= limit.maxRecords || bytes + size > limit.maxBytes)) {
          capped = true;
          break;
        }
        bytes += size;
      }
      end++;
    }
    if (end === this.head) return undefined;
    const taken = this.slots.slice(this.head, end);
    for (const slot of taken) this.byOffset.delete(slot.offset);
    this.head = end;
    // Compact occasionally instead of Array.shift per record (docs/design.md §6.10).
    if (this.head > 1024 && this.head * 2 > this.slots.length) {
      this.slots = this.slots.slice(this.head);
      this.head = 0;
    }
    const last = taken[taken.length - 1] as Slot<T>;
    return {
      nextOffset: (last.offset + 1n).toString(),
      completions: taken.map((s) => s.completion as T),
      offsets: taken.map((s) => s.offset.toString()),
      capped,
    };
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
    this.byOffset.clear();
    this.lastTracked = undefined;
  }
}
