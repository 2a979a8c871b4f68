/**
 * The headroom controller's constants: one home (docs/lanes.md, "Headroom" explains each). Times in ms.
 */
export const HEADROOM = {
  /** Each reading of idle CPU keeps this much of the previous estimate (a moving average over ticks). */
  smoothing: 0.5,
  /** Multiplicative decrease: × idle ÷ reserve, between these two factors. */
  decreaseMin: 0.5,
  decreaseMax: 0.9,
  /** A decrease waits this long after the previous one (the last one's effect shows first). */
  settleMs: 500,
  /** Additive increase per second while the idle CPU is at or above the reserve. */
  increasePerSecond: 0.2,
  /** The least share: headroom alone never pauses the backfill (the SLO guard can). */
  floor: 1 / 16,
} as const;

/**
 * Keeps idle CPU in the domain the process runs in (the machine, or its container's CPU quota) for
 * whatever wakes up there: the broker, another instance's online lane, a sidecar. An AIMD controller
 * of a share (0..1] of the backfill lane's CPU budget (docs/lanes.md, "Headroom"):
 *
 * - **Decrease** when the idle CPU (a moving average of the readings) is below the reserve: × idle ÷
 *   reserve, between × HEADROOM.decreaseMin and × decreaseMax, at most every settleMs, never below
 *   HEADROOM.floor.
 * - **Increase** by increasePerSecond while the idle CPU is at or above the reserve, up to 1.
 *
 * Every instance that shares the domain reads the same idle CPU and follows the same rule, so their
 * backfill lanes together leave about the reserve idle, and AIMD brings their shares together, with
 * no coordination between them. Pure: the caller passes the time and the readings.
 */
export class CpuHeadroom {
  private shareValue = 1;
  private idle: number | undefined;
  private lastAt: number | undefined;
  private lastDecreaseAt = Number.NEGATIVE_INFINITY;

  /** @param reserveCores idle CPU to keep, cores; 0 turns the controller off (the share stays 1). */
  constructor(readonly reserveCores: number) {
    if (!(reserveCores >= 0))
      throw new RangeError(`CpuHeadroom: the reserve must be ≥ 0 cores, got ${reserveCores}`);
  }

  /** The share of the backfill lane's CPU budget it may use now (HEADROOM.floor..1). */
  get share(): number {
    return this.shareValue;
  }

  /** The idle CPU it acts on (the moving average), cores; undefined before the first reading. */
  get idleCores(): number | undefined {
    return this.idle;
  }

  /**
   * A reading of the idle CPU since the previous one (undefined: none could be taken; the share
   * stays). Returns the share.
   */
  observe(nowMs: number, idleCores: number | undefined): number {
    const dtMs = this.lastAt === undefined ? 0 : Math.max(0, nowMs - this.lastAt);
    this.lastAt = nowMs;
    if (this.reserveCores === 0 || idleCores === undefined || !Number.isFinite(idleCores))
      return this.shareValue;
    this.idle =
      this.idle === undefined
        ? idleCores
        : HEADROOM.smoothing * this.idle + (1 - HEADROOM.smoothing) * idleCores;
    if (this.idle < this.reserveCores) {
      if (nowMs - this.lastDecreaseAt < HEADROOM.settleMs) return this.shareValue;
      const factor = Math.min(
        HEADROOM.decreaseMax,
        Math.max(HEADROOM.decreaseMin, this.idle / this.reserveCores),
      );
      this.shareValue = Math.max(HEADROOM.floor, this.shareValue * factor);
      this.lastDecreaseAt = nowMs;
    } else {
      this.shareValue = Math.min(1, this.shareValue + (HEADROOM.increasePerSecond * dtMs) / 1000);
    }
    return this.shareValue;
  }
}
