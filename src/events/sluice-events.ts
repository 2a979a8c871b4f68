import { EventEmitter } from "node:events";
import type { FallbackReason } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";
import type { FlushReason } from "../microbatch/batch-policy.js";

/**
 * Typed events that every stage emits and observability (metrics, logs, heartbeats) subscribes to
 * (docs/design.md §6.9). Stages never call metrics directly; they emit one of these. Payloads carry
 * durations (ms) and sizes, never payload text.
 */
export interface SluiceEventMap {
  /** A record was fetched and decoded (or failed to decode). */
  "record.consumed": { topic: string; partition: number; offset: string; timestampMs: number };
  /** Final fate of a consumed record; emitted when its transaction commits. */
  "record.outcome": {
    topic: string;
    partition: number;
    outcome: "result" | "dead_letter" | "duplicate";
    status?: "ok" | "expired" | "rejected" | "error" | "fallback";
    /** Set when status is fallback. */
    fallbackReason?: FallbackReason;
    /** commit time − request record timestamp */
    endToEndMs: number;
    errorCode?: string;
    /** Dead letters only: offset, failing stage, request id or key (the dead-letter log hashes them). */
    deadLetter?: { offset: string; stage: string; requestId?: string; key?: string };
  };
  "microbatch.flushed": {
    reason: FlushReason;
    /** The lane the batch came from (docs/lanes.md); absent in batch mode. */
    lane?: Lane;
    size: number;
    tokens: number;
    /** per item: flush time − enqueue time */
    queueWaitMs: number[];
    /** per item: enqueue time − record timestamp (fetch, decode, dedup; streaming only) */
    intakeMs?: number[];
  };
  "microbatch.inferred": {
    lane?: Lane;
    size: number;
    inferenceMs: number;
    realTokens: number;
    paddedTokens: number;
    /** CPU of the batch's ORT calls on the inference worker threads, ms (absent: not measured). */
    cpuMs?: number;
    expired: number;
    failed: number;
  };
  "transaction.finished": {
    topic: string;
    partition: number;
    outcome: "committed" | "aborted" | "fenced" | "failed";
    records: number;
    durationMs: number;
    /** Offset committed (next offset to read) when outcome is committed. */
    nextOffset?: string;
    /** Timestamp of the last record covered by this commit (event time). */
    lastEventTimestampMs?: number;
  };
  /** A Kafka request of this process answered (any producer, consumer or admin of its client). */
  "kafka.request": {
    /** The request's API as the client names it: Produce, Fetch, AddPartitionsToTxn, EndTxn, … */
    api: string;
    /** From the request's creation to its response (queued on the connection, then the round trip). */
    durationMs: number;
  };
  "partitions.assigned": { topic: string; partitions: number[] };
  "partitions.revoked": { topic: string; partitions: number[] };
  "partitions.restored": { topic: string; partition: number; dedupEntries: number; durationMs: number };
  /** `lanes`: which lanes' partitions were paused (absent: all). */
  "consumer.paused": { reason: string; lanes?: Lane[] };
  /** `lanes`: which lanes' partitions were resumed (absent: all). */
  "consumer.resumed": { lanes?: Lane[] };
  "model.loaded": {
    name: string;
    version: string;
    task: string;
    workers?: { online: number; backfill: number; backfillNice?: number; backfillSchedIdle?: boolean };
    /** `serving` (the model section) or `candidate` (docs/model-upgrades.md); absent = serving. */
    role?: "serving" | "candidate";
    /** Resident memory the model added while it loaded, MiB, and the time it took, ms. */
    rssMiB?: number;
    loadMs?: number;
    /** Output shape, as words (`384 dimensions`, `2 classes (neg,pos)`). */
    output?: string;
  };
  /** The version online requests are answered with (at start and after each decision), and the candidate's. */
  "model.online": { version: string; candidate?: string };
  /**
   * One shadowed online request scored by the candidate (docs/model-upgrades.md, "Shadow scoring"):
   * each model's wall time and model CPU per item, and the agreement where it means something.
   */
  "shadow.scored": {
    ok: boolean;
    online: { msPerItem: number; cpuMsPerItem?: number };
    candidate: { msPerItem: number; cpuMsPerItem?: number };
    agreement?: { measure: "label" | "cosine" | "max_abs_diff"; value: number };
  };
  /** Shadow requests not scored: `shed` (the queue was full), `revoked` (the partition moved first). */
  "shadow.dropped": { reason: "shed" | "revoked"; count: number };
  /** A partition's model switch boundary committed (docs/model-upgrades.md). */
  "model.switched": { topic: string; partition: number; offset: string; version: string; seq: number };
  /**
   * One per micro-batch after inference (the batch log's line). Request ids are hashed before they
   * are logged; text never travels on the bus.
   */
  "microbatch.completed": MicroBatchReport;
  /**
   * The backfill lane's SLO guard decided (every GUARD.tickMs while it runs; docs/lanes.md).
   * `transition` is set once when it engages, releases, or finds its target unmeetable.
   */
  "guard.adjusted": {
    allowance: number;
    estimateMs?: number;
    targetMs: number;
    backfillModelShare: number;
    /** The share of the backfill lane's CPU budget the headroom leaves it (src/processor/cpu-headroom.ts). */
    cpuHeadroomShare: number;
    transition?: "engaged" | "released" | "unmeetable";
  };
  /** One LagMonitor sample of a consumer group, read from the broker (see docs/observability.md). */
  "lag.sampled": LagSample;
}

export interface MicroBatchReport {
  reason: FlushReason;
  lane?: Lane;
  size: number;
  /** Real tokens the model ran (before padding; items that expired before inference excluded). */
  tokens: number;
  /** Tokens the model actually ran, padding included (0 when nothing ran). */
  paddedTokens: number;
  /** Per item: flush time − enqueue time, ms. */
  queueWaitMs: readonly number[];
  inferenceMs: number;
  ok: number;
  expired: number;
  failed: number;
  /** Request ids in batch order (hashed before logging). */
  requestIds: readonly string[];
  /** Input partitions the items came from. */
  sources: readonly { topic: string; partition: number }[];
}

export interface PartitionLag {
  topic: string;
  partition: number;
  /** Next offset the group will read; null when the group has committed nothing for this partition. */
  committedOffset: string | null;
  /** Log-end offset (high watermark). */
  endOffset: string;
  /** endOffset − committed (committed = log start offset when the group has none). */
  lagRecords: number;
  /** now − timestamp of the first uncommitted data record, s; 0 when there is none (idle / caught up); NaN when unknown. */
  lagSeconds: number;
  /** Event time of the last record before the committed offset, when it was read from the log. */
  lastCommittedEventTimestampMs?: number;
}

export interface TopicLag {
  topic: string;
  lagRecords: number;
  /** Committed offsets advanced per second across the group, smoothed; 0 before two samples. */
  throughputRecordsPerSecond: number;
  /** lagRecords ÷ throughput; 0 when lag is 0; +Inf when lag > 0 and nothing is being committed. */
  timeToDrainSeconds: number;
}

export interface LagSample {
  groupId: string;
  sampledAtMs: number;
  partitions: PartitionLag[];
  topics: TopicLag[];
}

export type SluiceEventName = keyof SluiceEventMap;

export interface SluiceEventsOptions {
  /**
   * Called when a subscriber throws. The throw never reaches the emitter (a metrics bug must not
   * break the pipeline or lose records) and the other subscribers still run. Default: a process
   * warning.
   */
  onListenerError?: (event: SluiceEventName, error: unknown) => void;
}

/**
 * The typed event bus every stage emits on and observability listens to. `emit` is safe: a throwing
 * subscriber is reported through `onListenerError`, never to the emitting stage.
 */
export class SluiceEvents {
  private readonly emitter = new EventEmitter();
  private readonly onListenerError: (event: SluiceEventName, error: unknown) => void;

  constructor(options: SluiceEventsOptions = {}) {
    this.emitter.setMaxListeners(50);
    this.onListenerError =
      options.onListenerError ??
      ((event, error) =>
        process.emitWarning(
          `a subscriber of ${event} threw (ignored): ${error instanceof Error ? error.message : String(error)}`,
        ));
  }

  emit<K extends SluiceEventName>(name: K, payload: SluiceEventMap[K]): void {
    // Skip the work entirely when nobody listens: keeps the hot path lean (docs/design.md §6.10).
    if (this.emitter.listenerCount(name) > 0) this.emitter.emit(name, payload);
  }

  on<K extends SluiceEventName>(name: K, listener: (payload: SluiceEventMap[K]) => void): () => void {
    const safe = (payload: SluiceEventMap[K]): void => {
      try {
        listener(payload);
      } catch (error) {
        this.onListenerError(name, error);
      }
    };
    this.emitter.on(name, safe);
    return () => this.emitter.off(name, safe);
  }
}
