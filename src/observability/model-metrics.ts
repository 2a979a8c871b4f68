import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { SluiceEvents } from "../events/sluice-events.js";

/**
 * The model family of Sluice's metrics (docs/model-upgrades.md): which model is loaded in each
 * role, which version answers online, the partition switches at their boundaries, and the shadow
 * comparison of the candidate with the online model (latency and CPU per item, agreement).
 */
export class ModelMetrics {
  private readonly info: Gauge<"name" | "version" | "task" | "role">;
  private readonly online: Gauge<"version" | "role">;
  private readonly switches: Counter<"version">;
  private readonly shadowRequests: Counter<"outcome">;
  private readonly shadowLatency: Histogram<"model">;
  private readonly shadowCpu: Histogram<"model">;
  private readonly shadowAgreement: Histogram<"measure">;
  /** The labels each role's model info was last set with (a reload replaces them). */
  private readonly infoLabels = new Map<string, Record<"name" | "version" | "task" | "role", string>>();

  constructor(registers: Registry[]) {
    this.online = new Gauge({
      name: "sluice_model_online_info",
      help: "The version online requests are answered with (role online) and the candidate's (role candidate); always 1.",
      labelNames: ["version", "role"],
      registers,
    });
    this.shadowRequests = new Counter({
      name: "sluice_shadow_requests_total",
      help: "Online requests picked for shadow scoring by the candidate, by outcome: scored, shed (queue full), revoked (the partition moved first).",
      labelNames: ["outcome"],
      registers,
    });
    const msBuckets = [0.25, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000];
    this.shadowLatency = new Histogram({
      name: "sluice_shadow_latency_ms_per_item",
      help: "Wall time of the model call per item, ms, for shadowed requests: model=online (the answer) or candidate (the shadow call).",
      labelNames: ["model"],
      buckets: msBuckets,
      registers,
    });
    this.shadowCpu = new Histogram({
      name: "sluice_shadow_cpu_ms_per_item",
      help: "Model CPU per item, ms, for shadowed requests: model=online or candidate (worker-thread CPU, src/model/thread-cpu-clock.ts).",
      labelNames: ["model"],
      buckets: msBuckets,
      registers,
    });
    this.shadowAgreement = new Histogram({
      name: "sluice_shadow_agreement",
      help: "Per shadowed request, how the candidate's answer compares with the online one: measure=label (1 = same label, else 0), cosine (embeddings of equal dimensions), max_abs_diff (same-shaped tensors).",
      labelNames: ["measure"],
      buckets: [0, 0.001, 0.01, 0.1, 0.5, 0.8, 0.9, 0.95, 0.99, 0.999, 1, 10],
      registers,
    });
    this.switches = new Counter({
      name: "sluice_model_switches_total",
      help: "Partition model switches committed at their boundary by this instance, by the version switched to.",
      labelNames: ["version"],
      registers,
    });
    this.info = new Gauge({
      name: "sluice_model_info",
      help: "Loaded model by role (serving = the model section, candidate = the candidate section); always 1.",
      labelNames: ["name", "version", "task", "role"],
      registers,
    });
  }

  /** Subscribes to the model and shadow events; returns their unsubscribe functions. */
  listen(events: SluiceEvents): Array<() => void> {
    return [
      events.on("model.loaded", (e) => {
        const role = e.role ?? "serving";
        const previous = this.infoLabels.get(role);
        if (previous) this.info.remove(previous);
        const labels = { name: e.name, version: e.version, task: e.task, role };
        this.infoLabels.set(role, labels);
        this.info.set(labels, 1);
      }),
      events.on("model.online", (e) => {
        this.online.reset();
        this.online.set({ version: e.version, role: "online" }, 1);
        if (e.candidate) this.online.set({ version: e.candidate, role: "candidate" }, 1);
      }),
      events.on("model.switched", (e) => this.switches.inc({ version: e.version })),
      events.on("shadow.dropped", (e) => this.shadowRequests.inc({ outcome: e.reason }, e.count)),
      events.on("shadow.scored", (e) => {
        this.shadowRequests.inc({ outcome: "scored" });
        this.shadowLatency.observe({ model: "online" }, e.online.msPerItem);
        this.shadowLatency.observe({ model: "candidate" }, e.candidate.msPerItem);
        if (e.online.cpuMsPerItem !== undefined)
          this.shadowCpu.observe({ model: "online" }, e.online.cpuMsPerItem);
        if (e.candidate.cpuMsPerItem !== undefined)
          this.shadowCpu.observe({ model: "candidate" }, e.candidate.cpuMsPerItem);
        if (e.agreement) this.shadowAgreement.observe({ measure: e.agreement.measure }, e.agreement.value);
      }),
    ];
  }
}
