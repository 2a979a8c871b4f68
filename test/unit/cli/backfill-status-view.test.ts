import { describe, expect, it } from "vitest";
import type { RunStatusReport } from "../../../src/backfill/run-outcomes.js";
import { BackfillStatusView, describe as describeRun } from "../../../src/cli/backfill-status-view.js";

const report: RunStatusReport = {
  runId: "corpus-v2",
  submitStatus: "submitted",
  input: "file:///data/corpus.jsonl",
  rowsTotal: 1000,
  rowsSubmitted: 998,
  rowsDone: 400,
  rowsOk: 395,
  rowsFailed: 5,
  rowsInvalid: 2,
  deadLetters: 1,
  failures: { MISSING_ID: 2, INFERENCE_FAILED: 1, DEADLINE_EXCEEDED: 2 },
  duplicateResults: 0,
  done: false,
  partitions: [
    { partition: 0, submitted: 500, done: 250, failed: 1 },
    { partition: 1, submitted: 498, done: 148, failed: 2 },
  ],
  modelVersions: [
    { name: "bge", version: "aaaaaaaaaaaa", rows: 390 },
    { name: "bge", version: "bbbbbbbbbbbb", rows: 7 },
  ],
  expectedModelVersion: "aaaaaaaaaaaa",
  rowsPerSec: 120.5,
  etaSeconds: 5,
  firstResultAt: null,
  lastResultAt: null,
};

describe("backfill status view", () => {
  it("prints progress, partitions, failures and flags an unexpected model version", () => {
    const text = describeRun(report);
    expect(text).toContain("run corpus-v2: in progress, 400/1000 rows (40.0 %), ok 395, failed 5");
    expect(text).toContain("partition 1: 148/498 done, 2 failed");
    expect(text).toContain("failures: MISSING_ID 2, DEADLINE_EXCEEDED 2, INFERENCE_FAILED 1");
    expect(text).toContain("rate 120.5 rows/s, ETA 5 s");
    expect(text).toContain("bge@bbbbbbbbbbbb: 7 rows (NOT the expected version)");
    expect(text).not.toContain("bge@aaaaaaaaaaaa: 390 rows (NOT");
  });

  it("off a terminal, no bar: just the report", () => {
    const out: string[] = [];
    const stream = { isTTY: false, write: (s: string) => out.push(s) } as unknown as NodeJS.WriteStream;
    const view = new BackfillStatusView(stream);
    view.progress(report);
    view.finish(report);
    expect(out).toEqual([`${describeRun(report)}\n`]);
  });
});
