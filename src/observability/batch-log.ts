import type { Logger } from "pino";
import type { MicroBatchReport, SluiceEvents } from "../events/sluice-events.js";
import { SluiceError } from "../sluice-error.js";
import { RequestIdHash } from "./request-id-hash.js";

export interface BatchLogOptions {
  /** Usually `logger.child({ component: "batch-log" })`. */
  logger: Logger;
  /** Hex characters kept of each SHA-256 id hash. Default 16 (64 bits: collisions negligible per batch). */
  idHashLength?: number;
  /** Ids listed per line; the rest are counted in `idsOmitted`. Default 256. */
  maxIdsPerLine?: number;
  /**
   * Optional HMAC key: with it ids are HMAC-SHA256'd so guessable ids cannot be reversed from logs by
   * hashing candidates. Default none (plain SHA-256, so an operator can find a known id's batch with
   * `printf %s "$ID" | sha256sum | cut -c1-16`).
   */
  idHashKey?: string;
}

/**
 * Writes one request-log line per micro-batch (from `batch.completed`): counts, timings, token and
 * padding figures, source partitions and hashed request ids. Never text. Skips all work (including
 * hashing) when the logger's level is above `info`.
 */
export class BatchLog {
  private readonly logger: Logger;
  private readonly ids: RequestIdHash;
  private readonly maxIdsPerLine: number;

  constructor(opts: BatchLogOptions) {
    const maxIdsPerLine = opts.maxIdsPerLine ?? 256;
    this.ids = new RequestIdHash({
      ...(opts.idHashLength === undefined ? {} : { length: opts.idHashLength }),
      ...(opts.idHashKey === undefined ? {} : { key: opts.idHashKey }),
    });
    if (!Number.isInteger(maxIdsPerLine) || maxIdsPerLine < 0) {
      throw new SluiceError("CONFIG_INVALID", `maxIdsPerLine must be an integer ≥ 0, got ${maxIdsPerLine}`);
    }
    this.logger = opts.logger;
    this.maxIdsPerLine = maxIdsPerLine;
  }

  attach(events: SluiceEvents): () => void {
    return events.on("microbatch.completed", (report) => this.write(report));
  }

  /** Logs one batch (for callers that do not use the event bus). */
  write(report: MicroBatchReport): void {
    if (!this.logger.isLevelEnabled("info")) return;
    this.logger.info({ batch: this.fields(report) }, "batch");
  }

  /** The `batch` object of a log line (exposed for tests and tooling). */
  fields(report: MicroBatchReport): Record<string, unknown> {
    const waits = [...report.queueWaitMs].sort((a, b) => a - b);
    const listed = report.requestIds.slice(0, this.maxIdsPerLine);
    const partitions = [...new Set(report.sources.map((s) => `${s.topic}:${s.partition}`))].sort();
    return {
      reason: report.reason,
      size: report.size,
      ok: report.ok,
      expired: report.expired,
      failed: report.failed,
      tokens: report.tokens,
      paddedTokens: report.paddedTokens,
      paddingRatio: report.paddedTokens > 0 ? round3(1 - report.tokens / report.paddedTokens) : 0,
      queueWaitMsP50: waits.length ? round3(waits[Math.floor((waits.length - 1) / 2)]!) : 0,
      queueWaitMsMax: waits.length ? round3(waits[waits.length - 1]!) : 0,
      inferenceMs: round3(report.inferenceMs),
      partitions,
      idHashes: listed.map((id) => this.hashId(id)),
      ...(report.requestIds.length > listed.length
        ? { idsOmitted: report.requestIds.length - listed.length }
        : {}),
    };
  }

  /** Truncated SHA-256 (or HMAC-SHA256 with `idHashKey`) of a request id, hex. */
  hashId(id: string): string {
    return this.ids.of(id);
  }
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
