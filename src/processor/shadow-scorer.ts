import type { InferenceOutput, InferenceResult, ModelIdentity } from "../contracts/inference.js";
import type { EncodedResult } from "../contracts/result-codec.js";
import { buildResult } from "../delivery/result-builder.js";
import { agreement, isShadowed } from "../delivery/shadow-agreement.js";
import type { SluiceEventMap } from "../events/sluice-events.js";
import { type ModelPort, modelInputOf, runBatch } from "../model/model-port.js";
import type { Clock } from "../time/clock.js";
import type { WorkItem } from "./request-intake.js";

/** What the online model did for one request, for the comparison. */
export interface OnlineAnswer {
  output: InferenceOutput;
  model: ModelIdentity;
  /** The online call's wall time and model CPU per item, ms. */
  msPerItem: number;
  cpuMsPerItem: number | undefined;
}

export interface ShadowScorerOptions {
  candidate: ModelPort;
  /** `candidate.shadowShare`: share of online requests shadowed (by a hash of the request id). */
  share: number;
  /** `topics.shadowResults`. */
  topic: string;
  /** The result encoder (shadow results are in the result format). */
  encode: (result: InferenceResult) => EncodedResult;
  /** Requests waiting for the candidate at most; a new one beyond it is shed (counted). */
  maxQueued: number;
  /** Requests per candidate call at most. */
  maxBatch: number;
  clock: Pick<Clock, "now">;
  emit<K extends "shadow.scored" | "shadow.dropped">(name: K, payload: SluiceEventMap[K]): void;
}

/** Requests waiting for the candidate at most, unless configured (a few batches' worth). */
export const SHADOW_QUEUE_ITEMS = 256;

/**
 * Shadow scoring (docs/model-upgrades.md, "Shadow scoring"): a share of online requests, picked by
 * a hash of the request id, is also scored by the candidate after the online model answered them,
 * off the online path. One candidate call at a time, in the backfill lane of the candidate's own
 * workers (lower CPU priority); the queue is bounded, and what does not fit is shed and counted, so a
 * shadow call never delays or fails an online result. The shadow result, in the result format with
 * the candidate's version, goes to `topics.shadowResults` in the partition's next transaction that
 * commits the request's offset or a later one (`TaskCommitter.attach`); never to the results topic.
 */
export class ShadowScorer {
  private readonly queue: { item: WorkItem; online: OnlineAnswer }[] = [];
  private running: Promise<void> | undefined;

  constructor(private readonly opts: ShadowScorerOptions) {}

  /** Offers an online request the online model answered; shadows it when picked and there is room. */
  offer(item: WorkItem, online: OnlineAnswer): void {
    if (item.lane !== "online" || !isShadowed(item.request.id, this.opts.share)) return;
    // After a promote the candidate may be what online answers with: nothing to compare.
    if (online.model.version === this.opts.candidate.identity.version) return;
    if (this.queue.length >= this.opts.maxQueued) {
      this.opts.emit("shadow.dropped", { reason: "shed", count: 1 });
      return;
    }
    this.queue.push({ item, online });
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
    });
  }

  /** Resolves when the queued shadow calls are done (shutdown does not wait for them). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const jobs = this.queue.splice(0, this.opts.maxBatch);
      const live = jobs.filter((j) => j.item.task.isCurrent(j.item.generation));
      if (live.length < jobs.length)
        this.opts.emit("shadow.dropped", { reason: "revoked", count: jobs.length - live.length });
      if (live.length === 0) continue;
      const c = this.opts.candidate;
      const started = this.opts.clock.now();
      const run = await runBatch(
        c,
        live.map((j) => modelInputOf(c.task, j.item.request)),
        "items",
        { lane: "backfill" },
      );
      const msPerItem = run.stats.inferenceMs / live.length;
      const cpuMsPerItem = run.stats.cpuMs === undefined ? undefined : run.stats.cpuMs / live.length;
      live.forEach(({ item, online }, i) => {
        const outcome = run.outcomes[i];
        if (outcome === undefined) return;
        const committer = item.task.committer;
        if (!item.task.isCurrent(item.generation) || committer?.attach === undefined) {
          this.opts.emit("shadow.dropped", { reason: "revoked", count: 1 });
          return;
        }
        const result = buildResult(
          {
            request: item.request,
            source: item.source, // the record's topic, partition and offset (the task's, at intake)
            requestTimestamp: item.timestampMs,
            model: c.identity,
            queueMs: Math.max(0, started - item.enqueuedAtMs),
            inferenceMs: run.stats.inferenceMs,
            batchSize: live.length,
            completedAt: this.opts.clock.now(),
          },
          outcome,
        );
        const encoded = this.opts.encode(result);
        committer.attach({
          outputs: [
            { topic: this.opts.topic, key: item.request.id, value: encoded.value, headers: encoded.headers },
          ],
          bookkeeping: [],
          // With the request's own transaction when that is still open, else the next one.
          atOffset: (BigInt(item.source.offset) + 1n).toString(),
          onCommitted: () => {},
        });
        const measure = outcome.ok ? agreement(online.output, outcome.output) : undefined;
        this.opts.emit("shadow.scored", {
          ok: outcome.ok,
          online: {
            msPerItem: online.msPerItem,
            ...(online.cpuMsPerItem === undefined ? {} : { cpuMsPerItem: online.cpuMsPerItem }),
          },
          candidate: { msPerItem, ...(cpuMsPerItem === undefined ? {} : { cpuMsPerItem }) },
          ...(measure ? { agreement: measure } : {}),
        });
      });
    }
  }
}
