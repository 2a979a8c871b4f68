import { backfillCpuCores, cpuHeadroomCores, onlineLatencyTargetMs } from "../config/lanes-config-schema.js";
import type { BackfillLimits, ModelBackfillLimits } from "../contracts/backfill-limits.js";
import type { SluiceEvents } from "../events/sluice-events.js";
import { cpuLimit } from "../model/cpu-limit.js";
import { IdleCpuMeter } from "../model/idle-cpu-meter.js";
import { mainThreadCpuMs } from "../model/thread-cpu-clock.js";
import type { Clock } from "../time/clock.js";
import { BackfillGuard, backfillLimits, GUARD, type GuardTarget } from "./backfill-guard.js";
import { CpuHeadroom } from "./cpu-headroom.js";
import type { ProcessorLog, ProcessorSettings } from "./stream-processor-options.js";

/**
 * The parts the guard's levers move, each taking its lever as the table made it (no clamping
 * there). The committers of backfill partitions come and go with the assignment, so they read
 * theirs, `BackfillThrottle.commitShare`, whenever they schedule a commit.
 */
export interface BackfillLeverTargets {
  /** `batchSlots`: backfill batches in flight (the batcher's backfill slots). */
  setBatchSlots(slots: number): void;
  /**
   * `workerShare`, `workerDepth`, `sliceShare`, and `cpuShare` as cores: the model's backfill calls
   * (ModelPort.limitBackfill).
   */
  limitModel(limits: ModelBackfillLimits): void;
  /** `fetchPaused`: the backfill partitions' fetches. */
  holdFetches(paused: boolean): void;
}

/** What the throttle needs of the processor (docs/design.md §6.17: a minimal context, not the owner). */
export interface BackfillThrottleContext {
  target: GuardTarget;
  maxInFlightBatches: number;
  events: SluiceEvents;
  clock: Clock;
  log: ProcessorLog;
  /** Topics of the online lane: their committed results are the guard's samples. */
  isOnlineTopic(topic: string): boolean;
  /** Record timestamp of the oldest online request in flight now (queued or in the model), if any. */
  oldestOnlineInFlightMs(): number | undefined;
  /** The backfill lane's CPU budget at allowance 1, cores (`lanes.backfillCpuCores`, resolved). */
  cpuCores: number;
  /** CPU the main thread has used so far, ms (thread-cpu-clock.ts `mainThreadCpuMs`; a seam for tests). */
  mainThreadCpuMs(): number;
  /** Idle CPU the backfill lane leaves, cores (`lanes.cpuHeadroomCores`, resolved; 0 = off). */
  headroomCores: number;
  /**
   * Idle CPU of the machine (or the container's quota) since the previous call, cores; undefined when
   * it cannot be read (src/model/idle-cpu-meter.ts `IdleCpuMeter.idleCores`; a seam for tests).
   */
  idleCores(): number | undefined;
  levers: BackfillLeverTargets;
}

/** How much of its last reading the main thread's backfill CPU keeps per tick (a moving average). */
const MAIN_CPU_SMOOTHING = 0.5;
/** The model's CPU budget is applied again when it moves by more than this share. */
const CPU_REAPPLY_SHARE = 0.05;

/**
 * Runs the backfill lane's SLO guard in a processor (docs/lanes.md, "The SLO guard"): feeds it the
 * online results' latencies as they commit (`record.outcome`) and the model time per lane
 * (`microbatch.inferred`), asks it for a decision every GUARD.tickMs, applies the limits when the
 * allowance changes (the one place they are applied: `apply`), emits `guard.adjusted`, and logs one
 * line when it engages or releases.
 */
export class BackfillThrottle {
  private readonly guard: BackfillGuard;
  private readonly headroom: CpuHeadroom;
  private limits: BackfillLimits;
  /** The allowance `limits` were made from. */
  private limitsAllowance: number;
  private timer: unknown;
  private running = false;
  /** Main-thread CPU at the last tick and when that was, and the records finished since, by lane. */
  private mainCpu = { atMs: 0, cpuMs: 0, records: 0, backfillRecords: 0 };
  /** The main thread's CPU for backfill records, cores (moving average over ticks). */
  private mainBackfillCores = 0;
  /** The cores last handed to the model (`ModelBackfillLimits.cpuCores`). */
  private modelCores = Number.NaN;
  private readonly unsubscribe: (() => void)[] = [];

  /**
   * The `commitShare` lever: the share of the commit cadence backfill partitions may use now, read by
   * each backfill partition's committer (PartitionCommitter `commitShare`) when it schedules a commit.
   */
  readonly commitShare = (): number => this.limits.commitShare;

  constructor(private readonly ctx: BackfillThrottleContext) {
    this.guard = new BackfillGuard(ctx.target);
    this.headroom = new CpuHeadroom(ctx.headroomCores);
    this.limitsAllowance = this.guard.allowance;
    this.limits = backfillLimits(this.limitsAllowance, ctx.maxInFlightBatches);
  }

  /**
   * The throttle of a processor with these settings: undefined without backfill topics, or with
   * `lanes.guard: false`.
   */
  static forSettings(
    settings: ProcessorSettings,
    ctx: Omit<
      BackfillThrottleContext,
      | "target"
      | "maxInFlightBatches"
      | "isOnlineTopic"
      | "cpuCores"
      | "mainThreadCpuMs"
      | "headroomCores"
      | "idleCores"
    >,
  ): BackfillThrottle | undefined {
    if (settings.backfillTopics.length === 0 || !settings.backfillGuard) return undefined;
    const limit = cpuLimit();
    const idle = new IdleCpuMeter(limit);
    return new BackfillThrottle({
      ...ctx,
      target: onlineLatencyTargetMs(settings.onlineLatencyTargetMs, settings),
      cpuCores: backfillCpuCores(settings.backfillCpuCores, limit.cores),
      headroomCores: cpuHeadroomCores(settings.cpuHeadroomCores, idle.capacityCores),
      idleCores: () => idle.idleCores(),
      maxInFlightBatches: settings.maxInFlightBatches,
      isOnlineTopic: (topic) => !settings.backfillTopics.includes(topic),
      mainThreadCpuMs,
    });
  }

  /**
   * Applies the guard's start allowance at once (the first backfill batch already runs under a
   * decision), then decides every GUARD.tickMs.
   */
  start(): void {
    if (this.running) return;
    this.running = true;
    const { events, clock } = this.ctx;
    this.mainCpu = { atMs: clock.now(), cpuMs: this.ctx.mainThreadCpuMs(), records: 0, backfillRecords: 0 };
    this.headroom.observe(clock.now(), this.ctx.idleCores()); // the first reading: where idle time counts from
    this.apply(this.limits);
    this.unsubscribe.push(
      events.on("record.outcome", (e) => {
        const online = this.ctx.isOnlineTopic(e.topic);
        this.mainCpu.records++;
        if (!online) this.mainCpu.backfillRecords++;
        if (e.outcome === "result" && online) this.guard.observeOnline(clock.now(), e.endToEndMs);
      }),
      events.on("microbatch.inferred", (e) =>
        this.guard.observeModel(clock.now(), e.lane ?? "online", e.inferenceMs),
      ),
      // A backfill partition moved in (a rebalance, a restart): its work starts cautious again.
      events.on("partitions.assigned", (e) => {
        if (!this.ctx.isOnlineTopic(e.topic) && e.partitions.length > 0) this.restart();
      }),
    );
    this.schedule();
  }

  /** Stops deciding and lifts every limit, so work already queued can finish (shutdown waits for it). */
  stop(): void {
    this.running = false;
    if (this.timer !== undefined) this.ctx.clock.clearTimeout(this.timer);
    this.timer = undefined;
    for (const off of this.unsubscribe.splice(0)) off();
    this.mainBackfillCores = 0;
    this.apply(backfillLimits(1, this.ctx.maxInFlightBatches), Number.POSITIVE_INFINITY);
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

  private restart(): void {
    this.guard.restart();
    this.follow(this.guard.allowance);
  }

  /** Applies the levers of `allowance` when it differs from the one in force. */
  private follow(allowance: number): void {
    if (allowance === this.limitsAllowance) return;
    this.limitsAllowance = allowance;
    this.apply(backfillLimits(allowance, this.ctx.maxInFlightBatches));
  }

  private tick(): void {
    this.guard.observeInFlight(this.ctx.oldestOnlineInFlightMs());
    const state = this.guard.tick(this.ctx.clock.now());
    this.measureMainThread();
    this.headroom.observe(this.ctx.clock.now(), this.ctx.idleCores());
    this.follow(state.allowance);
    // The main thread's part moves the model's cores every tick: hand them over when they moved.
    const cores = this.modelCpuCores(this.limits);
    const moved = Math.abs(cores - this.modelCores) > CPU_REAPPLY_SHARE * this.modelCores;
    if (moved || (cores === 0 && this.modelCores !== 0)) this.limitModel(this.limits, cores);
    const { transition, estimateMs, ...rest } = state;
    this.ctx.events.emit("guard.adjusted", {
      ...rest,
      cpuHeadroomShare: this.headroom.share,
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

  /**
   * The main thread's CPU since the last tick, the backfill records' share of it by the records
   * finished (a result, a dead letter or a duplicate: each passed decode, and most the encode and the
   * produce), into the moving average `mainBackfillCores`.
   */
  private measureMainThread(): void {
    const now = this.ctx.clock.now();
    const cpuMs = this.ctx.mainThreadCpuMs();
    const last = this.mainCpu;
    const wallMs = now - last.atMs;
    if (wallMs <= 0) return;
    const share = last.records === 0 ? 0 : last.backfillRecords / last.records;
    const cores = (Math.max(0, cpuMs - last.cpuMs) * share) / wallMs;
    this.mainBackfillCores = MAIN_CPU_SMOOTHING * this.mainBackfillCores + (1 - MAIN_CPU_SMOOTHING) * cores;
    this.mainCpu = { atMs: now, cpuMs, records: 0, backfillRecords: 0 };
  }

  /**
   * What the model's backfill calls may use: the lane's budget × `cpuShare` × the headroom's share,
   * less the main thread's part.
   */
  private modelCpuCores(limits: BackfillLimits): number {
    return Math.max(0, limits.cpuShare * this.ctx.cpuCores * this.headroom.share - this.mainBackfillCores);
  }

  /** The one place the levers are applied: each part gets its own, as the table made it. */
  private apply(limits: BackfillLimits, cpuCores = this.modelCpuCores(limits)): void {
    this.limits = limits;
    const { levers } = this.ctx;
    levers.setBatchSlots(limits.batchSlots);
    this.limitModel(limits, cpuCores);
    levers.holdFetches(limits.fetchPaused);
  }

  private limitModel(limits: BackfillLimits, cpuCores: number): void {
    this.modelCores = cpuCores;
    const model: ModelBackfillLimits = {
      workerShare: limits.workerShare,
      workerDepth: limits.workerDepth,
      sliceShare: limits.sliceShare,
      cpuCores,
    };
    this.ctx.levers.limitModel(model);
  }
}
