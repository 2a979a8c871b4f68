import type { Lane } from "../contracts/lane.js";

/** Records taken and not yet committed, per lane. */
export interface LaneCounts {
  online: number;
  backfill: number;
}

/**
 * Which lanes' partitions are paused, from the records taken and not yet committed in each lane
 * (docs/processor.md "Backpressure", docs/lanes.md). Pure bookkeeping; the processor pauses and
 * resumes the partitions and refuses fetches of a paused backfill lane.
 *
 * | lane     | pauses when                                   | resumes when                                 |
 * |----------|-----------------------------------------------|----------------------------------------------|
 * | backfill | backfill ≥ ⌈max / 2⌉                          | backfill ≤ max / 4, and online runs          |
 * | online   | online + min(backfill, ⌊max / 2⌋) ≥ max       | online + min(backfill, ⌊max / 2⌋) ≤ max / 2  |
 *
 * Backfill pauses first, at half the bound, and counts toward online's decision with at most that
 * half: one large backfill fetch that lands past the half (a fetch brings up to
 * consumer.maxBytesPerPartition) never pauses online requests. Without a backfill lane it is the
 * single rule it always was: pause at the bound, resume at half.
 *
 * The SLO guard can also hold the backfill lane (`holdBackfill`, docs/lanes.md "The SLO guard"): its
 * partitions stay paused while either holds them.
 */
export class LaneBackpressure {
  private readonly pausedLanes = new Set<Lane>();
  private readonly backfillQueueCap: number;
  private guardHolds = false;

  constructor(
    private readonly maxQueuedRecords: number,
    private readonly hasBackfill: boolean,
  ) {
    this.backfillQueueCap = Math.floor(maxQueuedRecords / 2);
  }

  get paused(): boolean {
    return this.pausedLanes.size > 0;
  }

  pausesLane(lane: Lane): boolean {
    return this.pausedLanes.has(lane) || (lane === "backfill" && this.guardHolds);
  }

  /** The queue bound (not the guard) pauses `lane`: its records in flight count against the bound. */
  boundPauses(lane: Lane): boolean {
    return this.pausedLanes.has(lane);
  }

  /**
   * The SLO guard holds (or lets go of) the backfill lane. Returns whether the lane's partitions
   * must be paused or resumed now: not when the queue bound already holds them.
   */
  holdBackfill(hold: boolean): "pause" | "resume" | undefined {
    if (hold === this.guardHolds) return undefined;
    this.guardHolds = hold;
    if (this.pausedLanes.has("backfill")) return undefined;
    return hold ? "pause" : "resume";
  }

  /** After records were taken: the lanes to pause now (none, or newly paused ones). */
  onQueued(q: LaneCounts): Lane[] {
    const pause: Lane[] = [];
    if (
      this.hasBackfill &&
      !this.pausedLanes.has("backfill") &&
      q.backfill >= Math.ceil(this.maxQueuedRecords / 2)
    )
      pause.push("backfill");
    if (!this.pausedLanes.has("online") && this.onlineMeasure(q) >= this.maxQueuedRecords) {
      pause.push("online");
      if (this.hasBackfill && !this.pausedLanes.has("backfill") && !pause.includes("backfill"))
        pause.push("backfill");
    }
    for (const lane of pause) this.pausedLanes.add(lane);
    return pause;
  }

  /** After records completed or committed: the lanes to resume now. */
  onDrained(q: LaneCounts): Lane[] {
    const resume: Lane[] = [];
    if (this.pausedLanes.has("online") && this.onlineMeasure(q) <= this.maxQueuedRecords / 2)
      resume.push("online");
    const onlineRuns = !this.pausedLanes.has("online") || resume.includes("online");
    if (this.pausedLanes.has("backfill") && onlineRuns && q.backfill <= this.maxQueuedRecords / 4)
      resume.push("backfill");
    for (const lane of resume) this.pausedLanes.delete(lane);
    // The guard still holds the backfill lane: its bound is clear, its partitions stay paused.
    return this.guardHolds ? resume.filter((lane) => lane !== "backfill") : resume;
  }

  /** The `consumer.paused` reason for lanes just paused. */
  reason(lanes: readonly Lane[]): string {
    return lanes.includes("online")
      ? `maxQueuedRecords=${this.maxQueuedRecords} reached`
      : `half of maxQueuedRecords=${this.maxQueuedRecords} reached: backfill paused first`;
  }

  /** What online's pause and resume look at: its own records plus backfill's, capped at its share. */
  private onlineMeasure(q: LaneCounts): number {
    return q.online + (this.hasBackfill ? Math.min(q.backfill, this.backfillQueueCap) : q.backfill);
  }
}
