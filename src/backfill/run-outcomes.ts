import type { InferenceResult } from "../contracts/inference.js";
import type { RunCost } from "../runs/run-cost.js";
import type { RunManifest } from "./run-manifest.js";

/** A row of the run as it sits on the backfill topic. */
export interface SubmittedRow {
  /** Input row number (header `sluice.run-row`; -1 when missing). */
  row: number;
  id: string;
  partition: number;
  offset: string;
}

/** A run's row that `serve` dead-lettered (e.g. INFERENCE_FAILED), from the dead-letter topic. */
export interface RunDeadLetter {
  id: string;
  row: number;
  /** Backfill partition the row came from. */
  partition: number;
  code: string;
  message: string;
}

/** Everything committed so far for one run: its results and its dead letters. */
export interface RunOutcomes {
  results: InferenceResult[];
  deadLetters: RunDeadLetter[];
}

export interface PartitionProgress {
  partition: number;
  submitted: number;
  done: number;
  failed: number;
}

/** `sluice backfill status ID --json`. */
export interface RunStatusReport {
  runId: string;
  /** submitting: rows are still being written; submitted: every input row is on the topic (or invalid). */
  submitStatus: RunManifest["status"];
  input: string;
  /** Input rows; null while a topic input is still being submitted (its count is known at the end). */
  rowsTotal: number | null;
  rowsSubmitted: number;
  /** Rows with their one outcome: a result, a dead letter, or invalid at submit. */
  rowsDone: number;
  rowsOk: number;
  /** Results that are not ok (expired, rejected, …), dead letters and rows invalid at submit. */
  rowsFailed: number;
  rowsInvalid: number;
  deadLetters: number;
  /** Failed rows by error code (non-ok results, dead letters, rows invalid at submit). */
  failures: Record<string, number>;
  /** Result records beyond the first for an id (exactly-once says 0). */
  duplicateResults: number;
  done: boolean;
  partitions: PartitionProgress[];
  /** Model versions that produced results, with their counts, most rows first. */
  modelVersions: ModelVersionCount[];
  expectedModelVersion: string | null;
  /** Results per second over the last minute of results (null before two results). */
  rowsPerSec: number | null;
  etaSeconds: number | null;
  firstResultAt: string | null;
  lastResultAt: string | null;
  /** The model cost every serve instance reported for the run's rows (committed shares, summed). */
  cost?: RunCost;
}

/** How many of a run's rows one model version answered. */
export interface ModelVersionCount {
  name: string;
  version: string;
  rows: number;
}

/**
 * The model versions that produced a run's results, each id counted once (its first result, the one
 * status and export take), in the order first seen. Pure.
 */
export function countModelVersions(results: readonly InferenceResult[]): ModelVersionCount[] {
  const seen = new Set<string>();
  const versions = new Map<string, ModelVersionCount>();
  for (const r of results) {
    if (seen.has(r.id)) continue;
    seen.add(r.id);
    const key = `${r.model.name}@${r.model.version}`;
    const v = versions.get(key) ?? { name: r.model.name, version: r.model.version, rows: 0 };
    v.rows++;
    versions.set(key, v);
  }
  return [...versions.values()];
}

/** Rate window: the rate is measured over the results of the last minute. */
const RATE_WINDOW_MS = 60_000;

/** Pure: a run's progress from its manifest and what is committed on the output topics. */
export function summarizeRun(manifest: RunManifest, outcomes: RunOutcomes): RunStatusReport {
  const byPartition = new Map<number, PartitionProgress>();
  for (const p of manifest.partitions) {
    byPartition.set(p.partition, { partition: p.partition, submitted: p.records, done: 0, failed: 0 });
  }
  const part = (p: number) => {
    let e = byPartition.get(p);
    if (!e) {
      e = { partition: p, submitted: 0, done: 0, failed: 0 };
      byPartition.set(p, e);
    }
    return e;
  };
  const seen = new Set<string>();
  let duplicates = 0;
  let ok = 0;
  let failed = 0;
  const times: number[] = [];
  const failures: Record<string, number> = {};
  const fail = (code: string, n = 1) => {
    failures[code] = (failures[code] ?? 0) + n;
  };
  for (const i of manifest.invalid) fail(i.code);
  // Invalid rows beyond the listed ones are counted without their code.
  if (manifest.rowsInvalid > manifest.invalid.length)
    fail("INVALID_ROW", manifest.rowsInvalid - manifest.invalid.length);
  for (const r of outcomes.results) {
    if (seen.has(r.id)) {
      duplicates++;
      continue;
    }
    seen.add(r.id);
    const e = part(r.source.partition);
    e.done++;
    if (r.status === "ok") ok++;
    else {
      failed++;
      e.failed++;
      fail(r.error?.code ?? r.status.toUpperCase());
    }
    times.push(r.timing.completedAt);
  }
  let deadLetters = 0;
  for (const d of outcomes.deadLetters) {
    if (seen.has(d.id)) {
      duplicates++;
      continue;
    }
    seen.add(d.id);
    deadLetters++;
    fail(d.code);
    const e = part(d.partition);
    e.done++;
    e.failed++;
  }
  const rowsDone = seen.size + manifest.rowsInvalid;
  const submitted = manifest.status === "submitted";
  const rowsTotal = submitted
    ? manifest.rowsRead
    : manifest.input.kind === "file"
      ? manifest.input.rows
      : null;
  times.sort((a, b) => a - b);
  const first = times[0];
  const last = times[times.length - 1];
  let rate: number | null = null;
  if (first !== undefined && last !== undefined && last > first) {
    const from = Math.max(first, last - RATE_WINDOW_MS);
    const inWindow = times.filter((t) => t >= from).length;
    rate = (inWindow - 1) / ((last - from) / 1000);
  }
  const done = submitted && rowsTotal !== null && rowsDone >= rowsTotal;
  const remaining = rowsTotal === null ? null : Math.max(0, rowsTotal - rowsDone);
  return {
    runId: manifest.runId,
    submitStatus: manifest.status,
    input: manifest.input.uri,
    rowsTotal,
    rowsSubmitted: manifest.rowsSubmitted,
    rowsDone,
    rowsOk: ok,
    rowsFailed: failed + deadLetters + manifest.rowsInvalid,
    rowsInvalid: manifest.rowsInvalid,
    deadLetters,
    failures,
    duplicateResults: duplicates,
    done,
    partitions: [...byPartition.values()].sort((a, b) => a.partition - b.partition),
    modelVersions: countModelVersions(outcomes.results).sort((a, b) => b.rows - a.rows),
    expectedModelVersion: manifest.model.expectedVersion,
    rowsPerSec: rate,
    etaSeconds: done ? 0 : remaining !== null && rate ? Math.round(remaining / rate) : null,
    firstResultAt: first === undefined ? null : new Date(first).toISOString(),
    lastResultAt: last === undefined ? null : new Date(last).toISOString(),
  };
}
