import { createHash, createHmac } from "node:crypto";
import type { Logger } from "pino";
import { SluiceError } from "../sluice-error.js";
import type { BatchReport, SluiceEvents } from "./sluice-events.js";

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
  private readonly idHashLength: number;
  private readonly maxIdsPerLine: number;
  private readonly idHashKey: string | undefined;

  constructor(opts: BatchLogOptions) {
    const idHashLength = opts.idHashLength ?? 16;
    const maxIdsPerLine = opts.maxIdsPerLine ?? 256;
    if (!Number.isInteger(idHashLength) || idHashLength < 8 || idHashLength > 64) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `idHashLength must be an integer in 8..64, got ${idHashLength}`,
      );
    }
    if (!Number.isInteger(maxIdsPerLine) || maxIdsPerLine < 0) {
      throw new SluiceError("CONFIG_INVALID", `maxIdsPerLine must be an integer ≥ 0, got ${maxIdsPerLine}`);
    }
    this.logger = opts.logger;
    this.idHashLength = idHashLength;
    this.maxIdsPerLine = maxIdsPerLine;
    this.idHashKey = opts.idHashKey;
  }

  attach(events: SluiceEvents): () => void {
    return events.on("batch.completed", (report) => this.write(report));
  }

  /** Logs one batch (for callers that do not use the event bus). */
  write(report: BatchReport): void {
    if (!this.logger.isLevelEnabled("info")) return;
    this.logger.info({ batch: this.fields(report) }, "batch");
  }

  /** The `batch` object of a log line (exposed for tests and tooling). */
  fields(report: BatchReport): Record<string, unknown> {
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
    const h = this.idHashKey === undefined ? createHash("sha256") : createHmac("sha256", this.idHashKey);
    return h.update(id, "utf8").digest("hex").slice(0, this.idHashLength);
  }
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
