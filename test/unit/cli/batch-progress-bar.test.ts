import { describe, expect, it } from "vitest";
import type { BatchRunSummary } from "../../../src/batch/batch-run-summary.js";
import { BatchProgressBar } from "../../../src/cli/batch-progress-bar.js";

function fakeStream() {
  const lines: string[] = [];
  const stream = { isTTY: false, write: (s: string) => lines.push(s) } as unknown as NodeJS.WriteStream;
  return { stream, lines };
}

describe("BatchProgress (plain lines)", () => {
  it("prints a start line, periodic lines with rate and ETA, and a final summary", () => {
    let now = 0;
    const { stream, lines } = fakeStream();
    const p = new BatchProgressBar({ stream, tty: false, intervalMs: 1000, clock: () => now });
    p.start({ totalRows: 1000, doneRows: 200 });
    now = 500;
    p.advance(100, 0); // before the interval: no line
    now = 2000;
    p.advance(95, 5); // 200 new rows in 2 s = 100 rows/s; 600 left → 6 s
    p.finish({
      runId: "r",
      action: "ran",
      rowsOk: 195,
      rowsFailed: 5,
      rowsSkipped: 200,
      shardsWritten: 2,
      wallMs: 2000,
      rowsPerSec: 100,
      totals: { rows: 400, ok: 395, failed: 5, shardsComplete: 4, wallMs: 2000 },
      message: "run r: done",
    } satisfies BatchRunSummary);
    expect(lines[0]).toBe("batch: starting, 1000 rows, 200 already done\n");
    expect(lines[1]).toBe("batch: 400/1000 rows (40.0 %), 100.0 rows/s, failed 5, ETA 6 s\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/rows ok 195, failed 5, skipped 200, wall 2\.0 s, 100\.0 rows\/s/);
  });
});
