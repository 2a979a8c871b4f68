import type { RecordHeaders } from "../contracts/codec.js";
import type { InferenceRequest } from "../contracts/inference.js";
import { type Lane, modelVersionFromHeaders, runIdFromHeaders } from "../contracts/lane.js";
import { DECODE_STAGE_CODES, type RequestDecoder } from "../contracts/request-codec.js";
import type { CompletionBuilder } from "../delivery/completion-builder.js";
import type { DeadLetterSource } from "../delivery/dead-letter.js";
import type { RememberedId } from "../delivery/dedup-segment.js";
import type { RecordCompletion } from "../delivery/outbound-message.js";
import type { ModelPort } from "../model/model-port.js";
import type { Clock } from "../time/clock.js";
import { NO_TRACING_TRACER, type PipelineTracer, type RequestSpan } from "../tracing/pipeline-tracer.js";
import type { PartitionTask } from "./partition-task.js";
import type { FetchedRecord } from "./processor-ports.js";

/** A decoded, deduplicated request on its way to the model. */
export interface WorkItem {
  task: PartitionTask;
  /** The task's generation at intake: the item is void once it changes. */
  generation: number;
  source: DeadLetterSource;
  timestampMs: number;
  request: InferenceRequest;
  /** The lane of the record's topic (its task's lane). */
  lane: Lane;
  /** The backfill run from the record's `sluice.run-id` header; undefined when absent. */
  runId: string | undefined;
  /**
   * Backfill rows: the model version the row's run was submitted for (`sluice.model-version` header,
   * `backfill submit --model candidate`); undefined = the version online answers with.
   */
  modelVersion?: string | undefined;
  /** The id the intake remembered; its transaction writes it to the dedup changelog. */
  remembered: RememberedId;
  deadlineMs: number;
  enqueuedAtMs: number;
  /** Token count for token-bounded batching (0 when the model cannot count it; it reports why later). */
  tokens: number;
  /** The request's span, from intake to commit (the do-nothing span when tracing is off). */
  span: RequestSpan;
}

export type IntakeResult =
  /** Finished at intake: a dead letter (undecodable, invalid) or a counted duplicate. */
  { kind: "done"; completion: RecordCompletion } | { kind: "queued"; item: WorkItem };

export interface RequestIntakeOptions {
  decoder: RequestDecoder;
  completions: CompletionBuilder;
  model: Pick<ModelPort, "countTokens">;
  clock: Pick<Clock, "now">;
  /** Deadline of requests without deadlineMs: record timestamp + this, ms. */
  defaultTimeoutMs: number;
  /** Starts each accepted record's request span (docs/observability.md, "Tracing"). Default: off. */
  tracer?: PipelineTracer;
}

/**
 * Decode → dedup → deadline for one fetched record of a running task: either its completion right
 * away or a work item for the batcher. Every record gets exactly one of the two.
 */
export class RequestIntake {
  constructor(private readonly opts: RequestIntakeOptions) {}

  take(task: PartitionTask, r: FetchedRecord): IntakeResult {
    const span = (this.opts.tracer ?? NO_TRACING_TRACER).startRequest(
      task.tp.topic,
      task.tp.partition,
      r,
      task.lane,
    );
    const taken = this.decide(task, r, span);
    if (taken.kind === "done") span.completed(taken.completion);
    else span.queued(taken.item.request.attributes);
    return taken;
  }

  private decide(task: PartitionTask, r: FetchedRecord, span: RequestSpan): IntakeResult {
    const timestampMs = Number(r.timestamp);
    const source: DeadLetterSource = {
      topic: task.tp.topic,
      partition: task.tp.partition,
      offset: r.offset,
      key: r.key ?? null,
      value: r.value ?? null,
      headers: r.headers as RecordHeaders | undefined,
      timestamp: r.timestamp,
    };
    const decoded = this.opts.decoder.decode(source.value, source.headers, source.key);
    if (!decoded.ok) {
      const stage = DECODE_STAGE_CODES.has(decoded.code) ? "decode" : "validate";
      return {
        kind: "done",
        completion: this.opts.completions.deadLetter(
          source,
          { code: decoded.code, message: decoded.message, stage },
          undefined,
          span,
        ),
      };
    }
    const now = this.opts.clock.now();
    const dedup = task.dedup as NonNullable<PartitionTask["dedup"]>;
    const { request } = decoded;
    if (dedup.seen(request.id, now))
      return { kind: "done", completion: this.opts.completions.duplicate(timestampMs, span) };
    // Remember at intake so a duplicate later in the same batch is caught too. If the transaction
    // carrying this entry fails, the task is reset and the dedup store rebuilt from the changelog.
    // Expiries and tombstones are the committer's, once per transaction (dedup-changelog.ts).
    const remembered = dedup.remember(request.id, now);
    // Backfill rows have no default deadline (docs/lanes.md): they wait for idle model time, however
    // long a backlog takes, and never expire unless they carry their own deadlineMs.
    const defaultDeadline =
      task.lane === "backfill"
        ? Number.POSITIVE_INFINITY
        : (Number.isFinite(timestampMs) ? timestampMs : now) + this.opts.defaultTimeoutMs;
    const deadlineMs = request.deadlineMs ?? defaultDeadline;
    let tokens = 0;
    try {
      tokens = typeof request.text === "string" ? this.opts.model.countTokens(request.text) : 0;
    } catch {
      tokens = 0; // the model reports the real problem per item when the batch runs
    }
    return {
      kind: "queued",
      item: {
        task,
        generation: task.generation,
        source,
        timestampMs,
        request,
        lane: task.lane,
        runId: runIdFromHeaders(source.headers),
        // Always present (undefined online), so every work item has one shape.
        modelVersion: task.lane === "backfill" ? modelVersionFromHeaders(source.headers) : undefined,
        remembered,
        deadlineMs,
        enqueuedAtMs: now,
        tokens,
        span,
      },
    };
  }
}
