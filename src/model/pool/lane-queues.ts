import type { Lane } from "../../contracts/lane.js";

/**
 * Waiting jobs, one FIFO per lane (a head index, no `Array.shift`: docs/design.md §6.10). The
 * dispatcher gives a free worker the oldest online job, and a backfill job only when no online job
 * waits, so an online call waits at most for the calls a worker already holds (JOBS_PER_WORKER;
 * docs/lanes.md, "Slices").
 */
export class LaneQueues<T> {
  private readonly lanes: Record<Lane, { items: T[]; head: number }> = {
    online: { items: [], head: 0 },
    backfill: { items: [], head: 0 },
  };

  push(item: T, lane: Lane): void {
    this.lanes[lane].items.push(item);
  }

  has(lane: Lane): boolean {
    const q = this.lanes[lane];
    return q.head < q.items.length;
  }

  /** The oldest waiting job of `lane`. */
  take(lane: Lane): T | undefined {
    const q = this.lanes[lane];
    if (q.head >= q.items.length) return undefined;
    const item = q.items[q.head++] as T;
    if (q.head === q.items.length) {
      q.items.length = 0;
      q.head = 0;
    } else if (q.head > 64 && q.head * 2 > q.items.length) {
      q.items.splice(0, q.head);
      q.head = 0;
    }
    return item;
  }

  /** Removes and returns every waiting job. */
  drain(): T[] {
    const out: T[] = [];
    for (const q of Object.values(this.lanes)) {
      out.push(...q.items.slice(q.head));
      q.items.length = 0;
      q.head = 0;
    }
    return out;
  }
}
