import { Counter, Gauge, type Registry } from "prom-client";
import type { SluiceEvents } from "../events/sluice-events.js";

/**
 * The SLO guard's metrics (docs/lanes.md): its allowance, the online latency estimate and target,
 * the backfill's share of model time and the guard's transitions. Registered at the guard's first
 * decision, so an instance without a guard (no backfill lane) exports none of them.
 */
export class GuardMetrics {
  private family: GuardFamily | undefined;

  constructor(private readonly registers: Registry[]) {}

  /** Subscribes to `guard.adjusted`; returns its unsubscribe function. */
  listen(events: SluiceEvents): Array<() => void> {
    return [
      events.on("guard.adjusted", (e) => {
        this.family ??= guardFamily(this.registers);
        const g = this.family;
        g.allowance.set(e.allowance);
        g.target.set(e.targetMs / 1000);
        g.backfillModelShare.set(e.backfillModelShare);
        g.cpuHeadroomShare.set(e.cpuHeadroomShare);
        if (e.estimateMs !== undefined) g.estimate.set(e.estimateMs / 1000);
        else g.estimate.reset();
        if (e.transition !== undefined) g.transitions.inc({ transition: e.transition });
      }),
    ];
  }
}

interface GuardFamily {
  allowance: Gauge;
  estimate: Gauge;
  target: Gauge;
  backfillModelShare: Gauge;
  cpuHeadroomShare: Gauge;
  transitions: Counter<"transition">;
}

function guardFamily(registers: Registry[]): GuardFamily {
  return {
    allowance: new Gauge({
      name: "sluice_backfill_guard_allowance_ratio",
      help: "The SLO guard's allowance for the backfill lane: 1 = unthrottled, 0 = paused (docs/lanes.md).",
      registers,
    }),
    estimate: new Gauge({
      name: "sluice_online_latency_estimate_seconds",
      help: "Online latency p99 over the guard's 3 s window (commit time minus request timestamp), seconds; absent before the first sample.",
      registers,
    }),
    target: new Gauge({
      name: "sluice_online_latency_target_seconds",
      help: "lanes.onlineLatencyTargetMs, seconds.",
      registers,
    }),
    backfillModelShare: new Gauge({
      name: "sluice_backfill_model_share_ratio",
      help: "The backfill lane's share of the model's busy time over the guard's 3 s window (0..1).",
      registers,
    }),
    cpuHeadroomShare: new Gauge({
      name: "sluice_backfill_cpu_headroom_ratio",
      help: "The share of the backfill lane's CPU budget that lanes.cpuHeadroomCores leaves it: below 1 while the machine (or the container's quota) has less idle CPU than that (docs/lanes.md, Headroom).",
      registers,
    }),
    transitions: new Counter({
      name: "sluice_backfill_guard_transitions_total",
      help: "Times the SLO guard engaged, released, or found its target unmeetable with the backfill paused.",
      labelNames: ["transition"],
      registers,
    }),
  };
}
