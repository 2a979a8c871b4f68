import type { Lane } from "../contracts/lane.js";

/**
 * Which lanes' partitions are paused, from the count of records taken and not yet committed
 * (docs/processor.md "Backpressure", docs/lanes.md). Pure bookkeeping; the processor pauses and
 * resumes the partitions.
 *
 * | lane     | pauses at                  | resumes at              |
 * |----------|----------------------------|-------------------------|
 * | backfill | ⌈maxQueuedRecords / 2⌉     | ≤ maxQueuedRecords / 4 (and online running) |
 * | online   | maxQueuedRecords           | ≤ maxQueuedRecords / 2  |
 *
 * Backfill pauses first and leaves the other half of the bound to online requests. Without a
 * backfill lane it is the single rule it always was: pause at the bound, resume at half.
 */
export class LaneBackpressure {
  private readonly pausedLanes = new Set<Lane>();

  constructor(
    private readonly maxQueuedRecords: number,
    private readonly hasBackfill: boolean,
  ) {}

  get paused(): boolean {
    return this.pausedLanes.size > 0;
  }

  pausesLane(lane: Lane): boolean {
    return this.pausedLanes.has(lane);
  }

  /** After records were taken: the lanes to pause now (none, or newly paused ones). */
  onQueued(queued: number): Lane[] {
    const pause: Lane[] = [];
    if (
      this.hasBackfill &&
      !this.pausedLanes.has("backfill") &&
      queued >= Math.ceil(this.maxQueuedRecords / 2)
    )
      pause.push("backfill");
    if (!this.pausedLanes.has("online") && queued >= this.maxQueuedRecords) {
      pause.push("online");
      if (this.hasBackfill && !this.pausedLanes.has("backfill") && !pause.includes("backfill"))
        pause.push("backfill");
    }
    for (const lane of pause) this.pausedLanes.add(lane);
    return pause;
  }

  /** After records completed or committed: the lanes to resume now. */
  onDrained(queued: number): Lane[] {
    const resume: Lane[] = [];
    if (this.pausedLanes.has("online") && queued <= this.maxQueuedRecords / 2) resume.push("online");
    const onlineRuns = !this.pausedLanes.has("online") || resume.includes("online");
    if (this.pausedLanes.has("backfill") && onlineRuns && queued <= this.maxQueuedRecords / 4)
      resume.push("backfill");
    for (const lane of resume) this.pausedLanes.delete(lane);
    return resume;
  }

  /** The `consumer.paused` reason for lanes just paused. */
  reason(lanes: readonly Lane[]): string {
    return lanes.includes("online")
      ? `maxQueuedRecords=${this.maxQueuedRecords} reached`
      : `half of maxQueuedRecords=${this.maxQueuedRecords} reached: backfill paused first`;
  }
}
