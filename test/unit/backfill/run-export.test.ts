import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { exportRun } from "../../../src/backfill/run-export.js";
import type { RunManifest } from "../../../src/backfill/run-manifest.js";
import { type RunOutcomes, type SubmittedRow, summarizeRun } from "../../../src/backfill/run-outcomes.js";
import type { InferenceResult } from "../../../src/contracts/inference.js";
import { isSluiceError } from "../../../src/sluice-error.js";

const ROWS = 10;

function manifest(over: Partial<RunManifest> = {}): RunManifest {
  return {
    formatVersion: 1,
    runId: "run-x",
    status: "submitted",
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
    sluice: { version: "t", gitCommit: null },
    input: {
      kind: "file",
      uri: "file:///in.jsonl",
      format: "jsonl",
      sha256: "f".repeat(64),
      sizeBytes: 9,
      rows: ROWS,
    },
    topics: { backfill: "bf", results: "res", deadLetters: "dlq" },
    model: { name: "m", expectedVersion: "abcdefabcdef" },
    config: { task: "embedding" },
    configHash: "c".repeat(64),
    rowsRead: ROWS,
    rowsSubmitted: ROWS - 1,
    rowsInvalid: 1,
    invalid: [{ row: 4, code: "MISSING_ID", message: "row 4 has no id" }],
    partitions: [
      { partition: 0, startOffset: "0", endOffset: "5", records: 5 },
      { partition: 1, startOffset: "0", endOffset: "4", records: 4 },
    ],
    transactions: 3,
    ...over,
  };
}

const submitted: SubmittedRow[] = Array.from({ length: ROWS }, (_, row) => row)
  .filter((row) => row !== 4)
  .map((row) => ({ row, id: `d${row}`, partition: row % 2, offset: String(row) }));

function result(id: string, partition: number, completedAt: number): InferenceResult {
  return {
    id,
    status: "ok",
    output: { embedding: [0.5, 0.25] },
    model: { name: "m", version: "abcdefabcdef" },
    source: { topic: "bf", partition, offset: "0" },
    timing: { requestTimestamp: 0, queueMs: 0, inferenceMs: 1, batchSize: 1, completedAt },
    attributes: null,
    truncated: false,
    error: null,
    runId: "run-x",
  };
}

/** Outcomes for every submitted row except `missing`; row 7 is a dead letter. */
function outcomes(missing: string[] = []): RunOutcomes {
  const results = submitted
    .filter((s) => !missing.includes(s.id) && s.row !== 7)
    .map((s) => result(s.id, s.partition, 1000 + s.row * 100));
  return {
    results,
    deadLetters: [{ id: "d7", row: 7, partition: 1, code: "INFERENCE_FAILED", message: "ORT failed" }],
  };
}

describe("exportRun", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-export-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("writes only complete parts, reports missing ids, and resumes to a complete export", async () => {
    const first = await exportRun({
      dir,
      manifest: manifest(),
      submitted,
      outcomes: outcomes(["d8"]),
      partRows: 4,
    });
    expect(first).toMatchObject({ complete: false, partsWritten: 2, missing: 1, missingIds: ["d8"] });
    expect((await readdir(dir)).sort()).toEqual(["manifest.json", "part-00000.jsonl", "part-00001.jsonl"]);
    const partial = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8"));
    expect(partial).toMatchObject({ status: "partial", missing: { count: 1, ids: ["d8"] } });

    const second = await exportRun({
      dir,
      manifest: manifest(),
      submitted,
      outcomes: outcomes(),
      partRows: 4,
    });
    expect(second).toMatchObject({ complete: true, partsWritten: 1, partsSkipped: 2, missing: 0 });
    const lines: { id: string; row: number; status: string; error?: { code: string } }[] = [];
    for (const name of ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]) {
      for (const l of (await readFile(join(dir, name), "utf8")).trim().split("\n")) lines.push(JSON.parse(l));
    }
    expect(lines.map((l) => l.row)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(lines[4]).toMatchObject({ id: "#row-4", status: "error", error: { code: "MISSING_ID" } });
    expect(lines[7]).toMatchObject({ id: "d7", status: "error", error: { code: "INFERENCE_FAILED" } });
    const m = JSON.parse(await readFile(join(dir, "manifest.json"), "utf8"));
    expect(m).toMatchObject({
      runId: "run-x",
      status: "complete",
      input: { sha256: "f".repeat(64) },
      configHash: "c".repeat(64),
      model: { versions: [{ version: "abcdefabcdef", rows: 8 }] },
      totals: { rows: 10, ok: 8, failed: 2 },
    });
    expect(m.parts.map((p: { sha256: string }) => p.sha256)).toHaveLength(3);
  });

  it("a second export of a complete run writes nothing", async () => {
    await exportRun({ dir, manifest: manifest(), submitted, outcomes: outcomes(), partRows: 4 });
    const before = (await stat(join(dir, "manifest.json"))).mtimeMs;
    const again = await exportRun({
      dir,
      manifest: manifest(),
      submitted,
      outcomes: outcomes(),
      partRows: 4,
    });
    expect(again).toMatchObject({ complete: true, partsWritten: 0, wroteAnything: false });
    expect((await stat(join(dir, "manifest.json"))).mtimeMs).toBe(before);
  });

  it("reports an id with two results as a duplicate and never calls the export complete", async () => {
    const o = outcomes();
    o.results.push(result("d1", 1, 5000));
    const s = await exportRun({ dir, manifest: manifest(), submitted, outcomes: o, partRows: 4 });
    expect(s).toMatchObject({ complete: false, duplicates: 1 });
  });

  it("refuses a directory holding another run's export", async () => {
    await exportRun({ dir, manifest: manifest(), submitted, outcomes: outcomes(), partRows: 4 });
    const error = await exportRun({
      dir,
      manifest: manifest({ runId: "run-y" }),
      submitted,
      outcomes: outcomes(),
      partRows: 4,
    }).catch((e: unknown) => e);
    expect(isSluiceError(error, "MANIFEST_MISMATCH")).toBe(true);
    expect((error as Error).message).toMatch(/export of run run-x, not run-y/);
  });

  it("while submitting, leaves the last, still growing part for later", async () => {
    const m = manifest({ status: "submitting", rowsRead: 6 });
    const s = await exportRun({
      dir,
      manifest: m,
      submitted: submitted.filter((r) => r.row < 6),
      outcomes: outcomes(),
      partRows: 4,
    });
    expect(s).toMatchObject({ complete: false, partsWritten: 1 });
  });
});

describe("summarizeRun", () => {
  it("counts done and failed rows per partition, model versions, rate and ETA", () => {
    const r = summarizeRun(manifest(), outcomes(["d8", "d9"]));
    expect(r).toMatchObject({
      runId: "run-x",
      rowsTotal: 10,
      rowsDone: 8, // 6 results + 1 dead letter + 1 invalid
      rowsOk: 6,
      rowsFailed: 2,
      deadLetters: 1,
      failures: { MISSING_ID: 1, INFERENCE_FAILED: 1 },
      done: false,
      expectedModelVersion: "abcdefabcdef",
    });
    expect(r.partitions).toEqual([
      { partition: 0, submitted: 5, done: 3, failed: 0 },
      { partition: 1, submitted: 4, done: 4, failed: 1 },
    ]);
    expect(r.modelVersions).toEqual([{ name: "m", version: "abcdefabcdef", rows: 6 }]);
    // 6 results between t=1000 and t=1600 ms → 5 intervals in 0.6 s.
    expect(r.rowsPerSec).toBeCloseTo(5 / 0.6, 5);
    expect(r.etaSeconds).toBe(Math.round(2 / (5 / 0.6)));
    expect(summarizeRun(manifest(), outcomes()).done).toBe(true);
    expect(summarizeRun(manifest({ status: "submitting" }), outcomes()).done).toBe(false);
  });
});
