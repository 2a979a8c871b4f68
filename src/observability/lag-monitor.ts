import type { LagSample, SluiceEvents } from "../events/sluice-events.js";
import { LagSampler, type LagSamplerOptions, TIMESTAMP_READ_TIMEOUT_MS } from "./lag-sampler.js";
import { PeriodicTask } from "./periodic-task.js";
import { TopicThroughput } from "./topic-throughput.js";

export interface LagMonitorOptions extends Omit<LagSamplerOptions, "probeTimeoutMs"> {
  /** Sampling period of `start()`, ms (config `observability.lagIntervalMs`); also caps one timestamp read. */
  intervalMs: number;
  /** Where `lag.sampled` is emitted (metrics and heartbeats listen). Optional for one-shot use. */
  events?: SluiceEvents;
}

/**
 * Samples consumer-group lag every `intervalMs` and emits `lag.sampled`: per partition from a
 * `LagSampler` (data records and lag seconds, docs/design.md §3), per topic throughput and time to drain
 * from a `TopicThroughput`. It reads the broker only through the ports it is handed
 * (`GroupOffsetsReader`, `RecordTimestampReader`), so a test passes fakes; `stop()` closes the
 * offsets reader. The metrics, the heartbeats and `sluice status` all read these samples.
 */
export class LagMonitor {
  private readonly sampler: LagSampler;
  private readonly throughput = new TopicThroughput();
  private readonly opts: LagMonitorOptions;
  private readonly schedule: PeriodicTask;
  private sampling: Promise<LagSample> | undefined;
  private last: LagSample | undefined;

  constructor(opts: LagMonitorOptions) {
    const { intervalMs } = opts;
    this.opts = opts;
    // A read that outlives the interval would delay the next sample: cap it there.
    this.sampler = new LagSampler({
      ...opts,
      probeTimeoutMs: Math.min(TIMESTAMP_READ_TIMEOUT_MS, intervalMs),
    });
    this.schedule = new PeriodicTask(
      () => this.sample(),
      intervalMs,
      (err) =>
        opts.logger?.warn({ err, groupId: opts.groupId }, "lag sample failed; will retry next interval"),
    );
  }

  /** The most recent sample, if any. */
  latest(): LagSample | undefined {
    return this.last;
  }

  /** Samples now, then every `intervalMs` (no overlap: the next sample is scheduled after one ends). */
  start(): void {
    this.schedule.start();
  }

  /** Stops sampling, waits for a sample in progress and closes the offsets reader. Safe to call twice. */
  async stop(): Promise<void> {
    this.schedule.stop();
    await this.sampling?.catch(() => undefined);
    await this.opts.offsets.close().catch(() => {});
  }

  /** One sample: reads the broker, emits `lag.sampled`, returns it. Concurrent calls share one read. */
  sample(): Promise<LagSample> {
    this.sampling ??= this.doSample().finally(() => {
      this.sampling = undefined;
    });
    return this.sampling;
  }

  private async doSample(): Promise<LagSample> {
    const { sampledAtMs, partitions } = await this.sampler.sample();
    const sample: LagSample = {
      groupId: this.sampler.groupId,
      sampledAtMs,
      partitions,
      topics: this.throughput.update(partitions, sampledAtMs),
    };
    this.last = sample;
    this.opts.events?.emit("lag.sampled", sample);
    return sample;
  }
}
