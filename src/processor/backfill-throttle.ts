import type { SluiceEvents } from "../events/sluice-events.js";
import type { Clock } from "../time/clock.js";
import {
  BackfillGuard,
  type BackfillLimits,
  backfillLimits,
  GUARD,
  type GuardTarget,
} from "./backfill-guard.js";
import type { ProcessorLog } from "./stream-processor-options.js";

/** What the throttle needs of the processor (docs/design.md §6.17: a minimal context, not the owner). */
export interface BackfillThrottleContext {
  target: GuardTarget;
  maxInFlightBatches: number;
  events: SluiceEvents;
  clock: Clock;
  log: ProcessorLog;
  /** Topics of the online lane: their committed results are the guard's samples. */
  isOnlineTopic(topic: string): boolean;
  /** Applies new limits to the backfill lane's levers (batch slots, workers, fetches). */
  apply(limits: BackfillLimits): void;
}

/**
 * Runs the backfill lane's SLO guard in a processor (docs/lanes.md, "The SLO guard"): feeds it the
 * online results' latencies as they commit (`record.outcome`) and the model time per lane
 * (`microbatch.inferred`), asks it for a decision every GUARD.tickMs, applies the limits when the
 * allowance changes, emits `guard.adjusted`, and logs one line when it engages or releases.
 */
export class BackfillThrottle {
  private readonly guard: BackfillGuard;
  private limits: BackfillLimits;
  /** The allowance `limits` were made from. */
  private limitsAllowance = 1;
  private timer: unknown;
  private running = false;
  private readonly unsubscribe: (() => void)[] = [];

  constructor(private readonly ctx: BackfillThrottleContext) {
    this.guard = new BackfillGuard(ctx.target);
    this.limits = backfillLimits(1, ctx.maxInFlightBatches);
  }

  /** Share of the commit cadence backfill partitions may use now (PartitionCommitter `commitShare`). */
  get commitShare(): number {
    return this.limits.commitShare;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    const { events, clock } = this.ctx;
    this.unsubscribe.push(
      events.on("record.outcome", (e) => {
        if (e.outcome === "result" && this.ctx.isOnlineTopic(e.topic))
          this.guard.observeOnline(clock.now(), e.endToEndMs);
      }),
      events.on("microbatch.inferred", (e) =>
        this.guard.observeModel(clock.now(), e.lane ?? "online", e.inferenceMs),
      ),
    );
    this.schedule();
  }

  /** Stops deciding and lifts every limit, so work already queued can finish (shutdown waits for it). */
  stop(): void {
    this.running = false;
    if (this.timer !== undefined) this.ctx.clock.clearTimeout(this.timer);
    this.timer = undefined;
    for (const off of this.unsubscribe.splice(0)) off();
    this.setLimits(backfillLimits(1, this.ctx.maxInFlightBatches));
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = this.ctx.clock.setTimeout(() => {
      this.timer = undefined;
      this.tick();
      this.schedule();
    }, GUARD.tickMs);
    (this.timer as { unref?: () => void } | undefined)?.unref?.();
  }

  private tick(): void {
    const state = this.guard.tick(this.ctx.clock.now());
    if (state.allowance !== this.limitsAllowance) {
      this.limitsAllowance = state.allowance;
      this.setLimits(backfillLimits(state.allowance, this.ctx.maxInFlightBatches));
    }
    const { transition, estimateMs, ...rest } = state;
    this.ctx.events.emit("guard.adjusted", {
      ...rest,
      ...(estimateMs === undefined ? {} : { estimateMs }),
      ...(transition === undefined ? {} : { transition }),
    });
    const facts = {
      onlineP99Ms: estimateMs === undefined ? null : Math.round(estimateMs),
      targetMs: state.targetMs,
      allowance: Number(state.allowance.toFixed(3)),
      backfillModelShare: Number(state.backfillModelShare.toFixed(3)),
    };
    if (transition === "engaged")
      this.ctx.log.info(
        facts,
        "backfill guard engaged: the online tail nears lanes.onlineLatencyTargetMs; backfill yields",
      );
    else if (transition === "released")
      this.ctx.log.info(facts, "backfill guard released: online is calm; backfill runs unthrottled");
    else if (transition === "unmeetable")
      this.ctx.log.warn(
        facts,
        "online tail stays above lanes.onlineLatencyTargetMs with the backfill paused: yielding cannot meet it; raise lanes.onlineLatencyTargetMs or add capacity (model.workers, instances)",
      );
  }

  private setLimits(limits: BackfillLimits): void {
    this.limits = limits;
    this.ctx.apply(limits);
  }
}
