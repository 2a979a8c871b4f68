import cliProgress from "cli-progress";
import type { RunStatusReport } from "../backfill/run-outcomes.js";
import { formatRunCost } from "../runs/run-cost.js";

/**
 * How `sluice backfill status` shows a run: a cli-progress bar on a terminal (kept and updated with
 * `--watch`), then per-partition lines, failures and model versions. Counts only; never payload text.
 */
export class BackfillStatusView {
  private bar: cliProgress.SingleBar | null = null;

  constructor(
    private readonly stream: NodeJS.WriteStream = process.stdout,
    private readonly tty: boolean = Boolean(stream.isTTY),
  ) {}

  /** Updates the bar (terminal only). */
  progress(r: RunStatusReport): void {
    if (!this.tty) return;
    const total = r.rowsTotal ?? r.rowsSubmitted;
    const payload = {
      rate: r.rowsPerSec === null ? "-" : r.rowsPerSec.toFixed(1),
      failed: r.rowsFailed,
      eta: r.etaSeconds === null ? "?" : `${r.etaSeconds}s`,
    };
    if (!this.bar) {
      this.bar = new cliProgress.SingleBar(
        {
          stream: this.stream,
          format: `${r.runId} {bar} {percentage}% | {value}/{total} rows | {rate} rows/s | failed {failed} | ETA {eta}`,
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      );
      this.bar.start(total, r.rowsDone, payload);
    } else {
      this.bar.setTotal(total);
      this.bar.update(r.rowsDone, payload);
    }
  }

  /** Stops the bar and prints the full report. */
  finish(r: RunStatusReport): void {
    this.bar?.stop();
    this.bar = null;
    this.stream.write(`${describe(r)}\n`);
  }
}

/** The plain-text report (also what a non-terminal gets). */
export function describe(r: RunStatusReport): string {
  const pct = r.rowsTotal ? ` (${((100 * r.rowsDone) / r.rowsTotal).toFixed(1)} %)` : "";
  const lines = [
    `run ${r.runId}: ${r.done ? "done" : r.submitStatus === "submitting" ? "submitting" : "in progress"}, ${r.rowsDone}/${r.rowsTotal ?? "?"} rows${pct}, ok ${r.rowsOk}, failed ${r.rowsFailed}`,
    `  input ${r.input}; submitted ${r.rowsSubmitted} rows, ${r.rowsInvalid} invalid at submit, ${r.deadLetters} dead letters`,
    `  rate ${r.rowsPerSec === null ? "-" : `${r.rowsPerSec.toFixed(1)} rows/s`}, ETA ${r.etaSeconds === null ? "unknown" : `${r.etaSeconds} s`}`,
  ];
  const codes = Object.entries(r.failures).sort((a, b) => b[1] - a[1]);
  if (codes.length > 0) lines.push(`  failures: ${codes.map(([code, n]) => `${code} ${n}`).join(", ")}`);
  for (const p of r.partitions) {
    lines.push(`  partition ${p.partition}: ${p.done}/${p.submitted} done, ${p.failed} failed`);
  }
  const versions = r.modelVersions.map((v) => {
    const flag =
      r.expectedModelVersion && v.version !== r.expectedModelVersion ? " (NOT the expected version)" : "";
    return `${v.name}@${v.version}: ${v.rows} rows${flag}`;
  });
  lines.push(
    `  model: expected ${r.expectedModelVersion ?? "unknown"}; results from ${versions.length ? versions.join(", ") : "none yet"}`,
  );
  if (r.cost) lines.push(`  ${formatRunCost(r.cost)} over ${r.cost.items} rows the model ran`);
  if (r.duplicateResults > 0) lines.push(`  WARNING: ${r.duplicateResults} duplicate results`);
  return lines.join("\n");
}
