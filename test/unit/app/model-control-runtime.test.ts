import { describe, expect, it } from "vitest";
import { assertRunScoredBy } from "../../../src/app/model-control-runtime.js";
import type { RunStatusReport } from "../../../src/backfill/run-outcomes.js";

const report = (over: Partial<RunStatusReport> = {}): RunStatusReport => ({
  runId: "corpus-2",
  submitStatus: "submitted",
  input: "file:///c.jsonl",
  rowsTotal: 10,
  rowsSubmitted: 10,
  rowsDone: 10,
  rowsOk: 10,
  rowsFailed: 0,
  rowsInvalid: 0,
  deadLetters: 0,
  failures: {},
  duplicateResults: 0,
  done: true,
  partitions: [],
  modelVersions: [{ name: "cand", version: "bbbbbbbbbbbb", rows: 10 }],
  expectedModelVersion: "bbbbbbbbbbbb",
  rowsPerSec: null,
  etaSeconds: null,
  firstResultAt: null,
  lastResultAt: null,
  ...over,
});

describe("promote --after-run: the guard against promoting before the corpus is re-embedded", () => {
  it("passes for a complete run scored only by the candidate's version", () => {
    expect(() => assertRunScoredBy(report(), "bbbbbbbbbbbb")).not.toThrow();
  });
  it("refuses an incomplete run, one submitted for another version, mixed versions, failed rows", () => {
    const refused = (r: RunStatusReport) => {
      try {
        assertRunScoredBy(r, "bbbbbbbbbbbb");
      } catch (e) {
        return `${(e as { code: string; message: string }).code}: ${(e as Error).message}`;
      }
      return "passed";
    };
    expect(refused(report({ done: false, rowsDone: 4 }))).toMatch(
      /MODEL_DECISION_REFUSED: .*not complete \(4 of 10/,
    );
    expect(refused(report({ expectedModelVersion: "aaaaaaaaaaaa" }))).toMatch(
      /submitted for model version aaaaaaaaaaaa/,
    );
    expect(
      refused(
        report({
          modelVersions: [
            { name: "old", version: "aaaaaaaaaaaa", rows: 3 },
            { name: "cand", version: "bbbbbbbbbbbb", rows: 7 },
          ],
        }),
      ),
    ).toMatch(/3 of its results come from other versions/);
    expect(refused(report({ rowsFailed: 2 }))).toMatch(/2 rows failed.*--model candidate/);
  });
});
