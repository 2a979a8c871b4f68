import cliProgress from "cli-progress";
import type { BatchProgressSink } from "../batch/batch-progress-sink.js";
import type { BatchRunSummary } from "../batch/batch-run-summary.js";

export interface BatchProgressBarOptions {
  /** Where lines go. Default process.stderr. */
  stream?: NodeJS.WriteStream;
  /** Force the bar (true) or plain lines (false). Default: bar when `stream` is a TTY. */
  tty?: boolean;
  /** Plain-line cadence, ms (`--progress-interval-ms` holds the default). */
  intervalMs: number;
  clock?: () => number;
}

/**
 * A cli-progress bar with rows/s and ETA on a terminal; elsewhere (CI, logs) a line every `intervalMs`
 * and one at the end. Counts only; never payload text.
 */
export class BatchProgressBar implements BatchProgressSink {
  private readonly stream: NodeJS.WriteStream;
  private readonly tty: boolean;
  private readonly intervalMs: number;
  private readonly clock: () => number;
  private bar: cliProgress.SingleBar | null = null;
  private total: number | null = null;
  private done = 0;
  private doneAtStart = 0;
  private ok = 0;
  private failed = 0;
  private startedMs = 0;
  private lastLineMs = 0;

  constructor(opts: BatchProgressBarOptions) {
    this.stream = opts.stream ?? process.stderr;
    this.tty = opts.tty ?? Boolean(this.stream.isTTY);
    this.intervalMs = opts.intervalMs;
    this.clock = opts.clock ?? Date.now;
  }

  start(info: { totalRows: number | null; doneRows: number }): void {
    this.total = info.totalRows;
    this.done = info.doneRows;
    this.doneAtStart = info.doneRows;
    this.startedMs = this.clock();
    this.lastLineMs = this.startedMs;
    if (this.tty) {
      this.bar?.stop();
      this.bar = new cliProgress.SingleBar(
        {
          stream: this.stream,
          format:
            "batch {bar} {percentage}% | {value}/{total} rows | {rate} rows/s | failed {failed} | ETA {eta_formatted}",
          etaBuffer: 50,
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(this.total ?? 0, this.done, { rate: "0", failed: 0 });
    } else {
      this.stream.write(
        `batch: starting, ${this.total ?? "unknown"} rows${this.done ? `, ${this.done} already done` : ""}\n`,
      );
    }
  }

  advance(ok: number, failed: number): void {
    this.ok += ok;
    this.failed += failed;
    this.done += ok + failed;
    const now = this.clock();
    if (this.bar) {
      if (this.total !== null && this.done > this.total) this.bar.setTotal(this.done);
      this.bar.update(this.done, { rate: this.rate(now).toFixed(1), failed: this.failed });
    } else if (now - this.lastLineMs >= this.intervalMs) {
      this.lastLineMs = now;
      this.stream.write(`batch: ${this.line(now)}\n`);
    }
  }

  finish(summary: BatchRunSummary): void {
    this.bar?.stop();
    this.bar = null;
    this.stream.write(
      `batch: ${summary.action === "ran" || summary.action === "retried" ? "done. " : ""}${summary.message}\n` +
        `batch: rows ok ${summary.rowsOk}, failed ${summary.rowsFailed}, skipped ${summary.rowsSkipped}, ` +
        `wall ${(summary.wallMs / 1000).toFixed(1)} s, ${summary.rowsPerSec.toFixed(1)} rows/s\n`,
    );
  }

  private rate(now: number): number {
    const sec = (now - this.startedMs) / 1000;
    return sec > 0 ? (this.done - this.doneAtStart) / sec : 0;
  }

  private line(now: number): string {
    const rate = this.rate(now);
    const pct = this.total ? ` (${((100 * this.done) / this.total).toFixed(1)} %)` : "";
    const eta =
      this.total && rate > 0 ? `, ETA ${Math.max(0, Math.round((this.total - this.done) / rate))} s` : "";
    return `${this.done}/${this.total ?? "?"} rows${pct}, ${rate.toFixed(1)} rows/s, failed ${this.failed}${eta}`;
  }
}
