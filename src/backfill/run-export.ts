import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { InferenceResult } from "../contracts/inference.js";
import { AtomicFileWriter, TEMP_SUFFIX, writeFileAtomic } from "../runs/atomic-file.js";
import { partFileName, partName } from "../runs/part-name.js";
import type { RunCost } from "../runs/run-cost.js";
import type { RunProvenance } from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";
import type { ExpectedModel, RunManifest } from "./run-manifest.js";
import {
  countModelVersions,
  type ModelVersionCount,
  type RunDeadLetter,
  type RunOutcomes,
  type SubmittedRow,
} from "./run-outcomes.js";

/**
 * `sluice backfill export ID --output DIR`: a run's outcomes as JSONL part files, one line per input
 * row in input order (its result, or its failure), plus `manifest.json` tying them to the input
 * (SHA-256), the model versions that produced them and the run's config digest. A part is written
 * only once every row in it has its outcome, atomically (temp file + rename) and recorded in
 * `manifest.json`; so an export can run while the backfill is in progress, resumes where it stopped,
 * and once complete a second export writes nothing.
 */
export const EXPORT_MANIFEST_FILE = "manifest.json";
export const EXPORT_FORMAT_VERSION = 1;
/** Ids listed in the manifest and the summary for missing or duplicated outcomes. */
const LISTED_IDS = 100;

export interface ExportPart {
  key: string;
  file: string;
  rowStart: number;
  rowEnd: number;
  rows: number;
  ok: number;
  failed: number;
  sha256: string;
}

/** The run's expected model and the model versions that produced the exported results. */
export interface ExportedModels extends ExpectedModel {
  versions: ModelVersionCount[];
}

/** The run's provenance (copied from its manifest), with the versions that actually answered. */
export interface ExportManifest extends RunProvenance<ExportedModels> {
  formatVersion: number;
  runId: string;
  status: "complete" | "partial";
  createdAt: string;
  updatedAt: string;
  topics: RunManifest["topics"];
  partRows: number;
  parts: ExportPart[];
  totals: { rows: number; ok: number; failed: number };
  missing: { count: number; ids: string[] };
  duplicates: { count: number; ids: string[] };
  /** Input rows whose id repeated an earlier row's: serve counted them as duplicates. */
  repeatedIds: number;
  /** What the run cost so far: the committed cost shares of every serve instance (docs/lanes.md, "Export"). */
  cost?: RunCost;
}

export interface ExportOptions {
  dir: string;
  manifest: RunManifest;
  submitted: readonly SubmittedRow[];
  outcomes: RunOutcomes;
  /** Rows per part file. */
  partRows: number;
  /** The run's cost, recorded in manifest.json. */
  cost?: RunCost;
  now?: () => Date;
}

export interface ExportSummary {
  runId: string;
  dir: string;
  complete: boolean;
  partsWritten: number;
  partsSkipped: number;
  rowsWritten: number;
  /** Submitted rows with no outcome yet (or, while submitting, rows not yet submitted are not counted). */
  missing: number;
  missingIds: string[];
  /** Ids with more than one outcome (exactly-once says 0). */
  duplicates: number;
  /** False when nothing at all was written (a repeated export of a complete run). */
  wroteAnything: boolean;
}

export async function exportRun(o: ExportOptions): Promise<ExportSummary> {
  const dir = resolve(o.dir);
  const now = o.now ?? (() => new Date());
  const m = o.manifest;
  await mkdir(dir, { recursive: true });
  for (const name of await readdir(dir)) {
    if (name.endsWith(TEMP_SUFFIX)) await rm(join(dir, name), { force: true });
  }
  const previous = await readExportManifest(dir);
  if (previous && (previous.runId !== m.runId || previous.partRows !== o.partRows)) {
    throw new SluiceError(
      "MANIFEST_MISMATCH",
      previous.runId !== m.runId
        ? `${join(dir, EXPORT_MANIFEST_FILE)} is the export of run ${previous.runId}, not ${m.runId}; choose another --output directory`
        : `${join(dir, EXPORT_MANIFEST_FILE)} was written with --part-rows ${previous.partRows}, not ${o.partRows}; use the same value or another --output directory`,
    );
  }
  if (previous?.status === "complete") {
    return {
      runId: m.runId,
      dir,
      complete: true,
      partsWritten: 0,
      partsSkipped: previous.parts.length,
      rowsWritten: 0,
      missing: 0,
      missingIds: [],
      duplicates: previous.duplicates.count,
      wroteAnything: false,
    };
  }

  // One outcome per id: the first result, else the first dead letter; any further one is a duplicate.
  const outcome = new Map<string, { result: InferenceResult } | { deadLetter: RunDeadLetter }>();
  const duplicateIds: string[] = [];
  for (const result of o.outcomes.results) {
    if (outcome.has(result.id)) duplicateIds.push(result.id);
    else outcome.set(result.id, { result });
  }
  for (const deadLetter of o.outcomes.deadLetters) {
    if (outcome.has(deadLetter.id)) duplicateIds.push(deadLetter.id);
    else outcome.set(deadLetter.id, { deadLetter });
  }
  const rowsById = new Map<number, SubmittedRow>();
  for (const s of o.submitted) rowsById.set(s.row, s);
  const invalid = new Map(m.invalid.map((i) => [i.row, i]));
  const firstRowOfId = new Map<string, number>();
  let repeatedIds = 0;
  for (const s of [...o.submitted].sort((a, b) => a.row - b.row)) {
    if (firstRowOfId.has(s.id)) repeatedIds++;
    else firstRowOfId.set(s.id, s.row);
  }

  const done = new Map((previous?.parts ?? []).map((p) => [p.key, p]));
  const parts: ExportPart[] = [...done.values()];
  const rowsKnown = m.rowsRead;
  const nParts = Math.ceil(rowsKnown / o.partRows);
  const missingIds: string[] = [];
  let missing = 0;
  let partsWritten = 0;
  let rowsWritten = 0;
  for (let k = 0; k < nParts; k++) {
    const key = partName(k);
    if (done.has(key)) continue;
    const rowStart = k * o.partRows;
    const rowEnd = Math.min(rowStart + o.partRows, rowsKnown);
    // While submitting, the last part may still grow: write it only once the run is fully submitted.
    if (m.status !== "submitted" && rowEnd - rowStart < o.partRows) break;
    const lines: string[] = [];
    let ok = 0;
    let failed = 0;
    let complete = true;
    for (let row = rowStart; row < rowEnd; row++) {
      const s = rowsById.get(row);
      if (!s) {
        const bad = invalid.get(row);
        lines.push(
          JSON.stringify({
            id: `#row-${row}`,
            row,
            status: "error",
            runId: m.runId,
            error: bad
              ? { code: bad.code, message: bad.message }
              : { code: "INPUT_INVALID", message: `row ${row} was not submitted (see the run manifest)` },
          }),
        );
        failed++;
        continue;
      }
      if (firstRowOfId.get(s.id) !== row) continue; // repeated id: its one outcome is at its first row
      const found = outcome.get(s.id);
      if (!found) {
        complete = false;
        missing++;
        if (missingIds.length < LISTED_IDS) missingIds.push(s.id);
        continue;
      }
      if ("result" in found) {
        const { id, ...rest } = found.result;
        lines.push(JSON.stringify({ id, row, ...rest }));
        if (found.result.status === "ok") ok++;
        else failed++;
      } else {
        const d = found.deadLetter;
        lines.push(
          JSON.stringify({
            id: s.id,
            row,
            status: "error",
            runId: m.runId,
            error: { code: d.code, message: d.message },
            source: { topic: m.topics.backfill, partition: s.partition, offset: s.offset },
          }),
        );
        failed++;
      }
    }
    if (!complete) continue;
    const file = partFileName(key, "jsonl");
    const writer = new AtomicFileWriter(join(dir, file));
    try {
      for (let i = 0; i < lines.length; i += 1000) {
        await writer.write(`${lines.slice(i, i + 1000).join("\n")}\n`);
      }
      const { sha256 } = await writer.commit();
      parts.push({ key, file, rowStart, rowEnd, rows: lines.length, ok, failed, sha256 });
    } catch (error) {
      await writer.abort();
      throw error;
    }
    partsWritten++;
    rowsWritten += lines.length;
  }
  parts.sort((a, b) => a.rowStart - b.rowStart);
  const complete =
    m.status === "submitted" && parts.length === nParts && missing === 0 && duplicateIds.length === 0;
  const at = now().toISOString();
  const next: ExportManifest = {
    formatVersion: EXPORT_FORMAT_VERSION,
    runId: m.runId,
    status: complete ? "complete" : "partial",
    createdAt: previous?.createdAt ?? at,
    updatedAt: at,
    sluice: m.sluice,
    input: m.input,
    topics: m.topics,
    model: {
      name: m.model.name,
      expectedVersion: m.model.expectedVersion,
      ...(m.model.role ? { role: m.model.role } : {}),
      versions: countModelVersions(o.outcomes.results),
    },
    config: m.config,
    configHash: m.configHash,
    partRows: o.partRows,
    parts,
    totals: {
      rows: parts.reduce((n, p) => n + p.rows, 0),
      ok: parts.reduce((n, p) => n + p.ok, 0),
      failed: parts.reduce((n, p) => n + p.failed, 0),
    },
    missing: { count: missing, ids: missingIds },
    duplicates: { count: duplicateIds.length, ids: duplicateIds.slice(0, LISTED_IDS) },
    repeatedIds,
    ...(o.cost ? { cost: o.cost } : {}),
  };
  const changed =
    !previous ||
    partsWritten > 0 ||
    previous.status !== next.status ||
    previous.missing.count !== next.missing.count ||
    previous.duplicates.count !== next.duplicates.count ||
    JSON.stringify(previous.cost) !== JSON.stringify(next.cost);
  if (changed) await writeFileAtomic(join(dir, EXPORT_MANIFEST_FILE), `${JSON.stringify(next, null, 2)}\n`);
  return {
    runId: m.runId,
    dir,
    complete,
    partsWritten,
    partsSkipped: done.size,
    rowsWritten,
    missing,
    missingIds: missingIds.slice(0, 20),
    duplicates: duplicateIds.length,
    wroteAnything: changed,
  };
}

async function readExportManifest(dir: string): Promise<ExportManifest | null> {
  const path = join(dir, EXPORT_MANIFEST_FILE);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  try {
    const parsed = JSON.parse(text) as ExportManifest;
    if (parsed.formatVersion === EXPORT_FORMAT_VERSION && Array.isArray(parsed.parts)) return parsed;
  } catch {
    // falls through to the error below
  }
  throw new SluiceError(
    "MANIFEST_MISMATCH",
    `${path} is not a Sluice backfill export manifest (format ${EXPORT_FORMAT_VERSION}); choose an empty --output directory`,
  );
}
