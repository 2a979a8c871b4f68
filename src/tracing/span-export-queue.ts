import { type Context, TraceFlags } from "@opentelemetry/api";
import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { NO_SPANS, type SpanExportStats } from "./span-export-stats.js";

export interface SpanExportQueueOptions {
  /** Ended spans held for export; more are dropped and counted. */
  maxQueueSize: number;
  maxExportBatchSize: number;
  /** Longest wait between exports, ms. */
  scheduledDelayMs: number;
  /** An export not answered within this is counted failed and the next one may go, ms. */
  exportTimeoutMs: number;
}

/**
 * The SDK's BatchSpanProcessor with its queue bounded and its losses counted: a span that ends
 * while `maxQueueSize` spans wait is dropped (one counter step, no allocation, no I/O), so a collector
 * that is slow or down never holds up or fails the pipeline; `stats()` says how many spans went,
 * were dropped or were lost in failed exports (for a metric). Export runs in the background, one
 * request at a time, `maxExportBatchSize` spans each.
 *
 * The count of waiting spans is kept here rather than read from the SDK's private buffer: a span is
 * counted in when it is handed to the processor and out when the processor hands it to the exporter,
 * which is exactly when it leaves the processor's buffer, so the bound here is the processor's own.
 */
export class SpanExportQueue implements SpanProcessor {
  readonly #processor: BatchSpanProcessor;
  readonly #maxQueueSize: number;
  readonly #exportTimeoutMs: number;
  readonly #stats: SpanExportStats = { ...NO_SPANS };
  #closed = false;

  constructor(exporter: SpanExporter, options: SpanExportQueueOptions) {
    this.#maxQueueSize = options.maxQueueSize;
    this.#exportTimeoutMs = options.exportTimeoutMs;
    this.#processor = new BatchSpanProcessor(this.#counting(exporter, options.exportTimeoutMs), {
      maxQueueSize: options.maxQueueSize,
      maxExportBatchSize: Math.min(options.maxExportBatchSize, options.maxQueueSize),
      scheduledDelayMillis: options.scheduledDelayMs,
      exportTimeoutMillis: options.exportTimeoutMs,
    });
  }

  stats(): SpanExportStats {
    return { ...this.#stats };
  }

  onStart(span: Span, parentContext: Context): void {
    this.#processor.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    // Unsampled spans are never exported (the processor skips them too).
    if (this.#closed || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.#stats.queued >= this.#maxQueueSize) {
      this.#stats.dropped++;
      return;
    }
    this.#stats.queued++;
    this.#processor.onEnd(span);
  }

  /** Exports what waits now; resolves when those exports have answered (or timed out). */
  forceFlush(): Promise<void> {
    return this.#processor.forceFlush().catch(() => {});
  }

  /**
   * Exports what waits, then shuts the exporter down; spans ending later are ignored. Resolves
   * within the export timeout even when the collector is down (what is still unsent is lost), so
   * a dead collector never holds up a process's shutdown.
   */
  async shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.#exportTimeoutMs);
      timer.unref();
    });
    await Promise.race([this.#processor.shutdown().catch(() => {}), bound]);
    clearTimeout(timer);
  }

  /** The exporter as the processor sees it: every export counted, answered at most once. */
  #counting(exporter: SpanExporter, timeoutMs: number): SpanExporter {
    const stats = this.#stats;
    return {
      export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
        stats.queued = Math.max(0, stats.queued - spans.length);
        stats.exporting += spans.length;
        let answered = false;
        const answer = (result: ExportResult) => {
          if (answered) return;
          answered = true;
          clearTimeout(timer);
          stats.exporting -= spans.length;
          if (result.code === ExportResultCode.SUCCESS) stats.exported += spans.length;
          else {
            stats.failedExports++;
            stats.failedSpans += spans.length;
          }
          done(result);
        };
        const timer = setTimeout(
          () => answer({ code: ExportResultCode.FAILED, error: new Error(`no answer in ${timeoutMs} ms`) }),
          timeoutMs,
        );
        timer.unref();
        try {
          exporter.export(spans, answer);
        } catch (error) {
          answer({ code: ExportResultCode.FAILED, error: error as Error });
        }
      },
      shutdown: () => exporter.shutdown(),
      forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
    };
  }
}
