/** What became of the spans handed to the export queue: counters since it started, and the queue now. */
export interface SpanExportStats {
  /** Spans waiting for export now. */
  queued: number;
  /** Spans in an export that has not answered yet. */
  exporting: number;
  /** Spans the exporter delivered. */
  exported: number;
  /** Spans dropped because the queue was full (a slow or dead collector): they are never exported. */
  dropped: number;
  /** Export calls that failed (refused, unreachable, or no answer within the export timeout). */
  failedExports: number;
  /** Spans those failed calls carried: lost too. */
  failedSpans: number;
}

/** The counters before the first span: all zero. */
export const NO_SPANS: Readonly<SpanExportStats> = Object.freeze({
  queued: 0,
  exporting: 0,
  exported: 0,
  dropped: 0,
  failedExports: 0,
  failedSpans: 0,
});
