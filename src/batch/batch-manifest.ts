import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../runs/atomic-file.js";
import type { RunCost, RunCostCounts } from "../runs/run-cost.js";
import { changedConfigKeys, inputChange, type RunProvenance } from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";
import type { InFlightShard } from "./batch-sink.js";

/**
 * `manifest.json`: what a batch run read, with which model and config, and which shards are done.
 * It is the run's only checkpoint: a shard counts as done once it is listed here (docs/batch-mode.md).
 */
export const MANIFEST_FILE = "manifest.json";
export const MANIFEST_FORMAT_VERSION = 1;

/** The model that produced a batch run's outputs: the provenance's model part. */
export interface ModelProvenance {
  name: string;
  version: string;
  task: string;
  /** SHA-256 of tokenizer.json when the model exposes it, else null (the version covers it). */
  tokenizerHash: string | null;
}

export interface ShardRecord {
  /** Unit name, also the part file stem: `part-00003` or `retry-01-part-00000`. */
  key: string;
  /** First input row (inclusive) and last (exclusive) for main shards; for retry shards, the range of
   * positions in the retry round's sorted row list. */
  rowStart: number;
  rowEnd: number;
  rows: number;
  ok: number;
  failures: number;
  /** Part file name relative to the output dir, or `kafka:TOPIC` for a topic output. */
  output: string;
  /** SHA-256 of the part file (null for a topic output). */
  sha256: string | null;
  /** Failure file relative to the manifest dir (null when the shard had no failures). */
  failuresFile: string | null;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
}

export interface RetryRound {
  round: number;
  /** Rows that were open failures when the round started. */
  rowsAttempted: number;
  shards: ShardRecord[];
  complete: boolean;
  startedAt: string;
  finishedAt: string | null;
}

export interface BatchManifest extends RunProvenance<ModelProvenance> {
  formatVersion: number;
  runId: string;
  status: "running" | "complete";
  createdAt: string;
  updatedAt: string;
  output: { uri: string; format: string };
  shardSize: number;
  shards: ShardRecord[];
  retries: RetryRound[];
  /** Shard being written to a topic output; resume checks whether its transaction committed. */
  inFlight: (InFlightShard & { round: number | null; pending: ShardRecord }) | null;
  totals: RunTotals;
  /**
   * What the invocations that wrote shards spent (docs/batch-mode.md, "Cost"); absent until the
   * first shard is written. An invocation that writes nothing adds nothing.
   */
  cost?: BatchRunCost;
}

/** A batch run's cost: the figures, and how its model CPU was measured. */
export interface BatchRunCost extends RunCost {
  /** src/model/thread-cpu-clock.ts: proc-schedstat, proc-stat, thread-cpu-usage or wall-estimate. */
  modelCpuSource: string | null;
}

/** The counts a manifest's cost was computed from, to add the next invocation's to. */
export function costCounts(cost: RunCost | undefined): RunCostCounts {
  if (!cost) return { items: 0, tokens: 0, modelCpuMs: 0, processCpuMs: 0, wallMs: 0 };
  return {
    items: cost.items,
    tokens: cost.tokens,
    modelCpuMs: cost.modelCpuSeconds * 1000,
    processCpuMs: (cost.totalCpuSeconds ?? 0) * 1000,
    wallMs: (cost.wallSeconds ?? 0) * 1000,
  };
}

/** Whole-run counts; `failed` counts failures still open (not recovered by a retry round). */
export interface RunTotals {
  rows: number;
  ok: number;
  failed: number;
  shardsComplete: number;
  wallMs: number;
}

/**
 * What a run is, as opposed to how far it got. A resumed run must agree on all of it but `sluice`
 * (a newer Sluice may finish an older run; the manifest keeps the one that started it).
 */
export type RunIdentity = Pick<
  BatchManifest,
  "sluice" | "input" | "model" | "configHash" | "config" | "shardSize" | "output"
>;

/** A new run's manifest, nothing done yet. */
export function newBatchManifest(identity: RunIdentity, now: Date = new Date()): BatchManifest {
  const at = now.toISOString();
  const { sluice, ...rest } = identity; // provenance first, in the order manifests always had
  return {
    formatVersion: MANIFEST_FORMAT_VERSION,
    runId: newRunId(now),
    status: "running",
    createdAt: at,
    updatedAt: at,
    sluice,
    ...rest,
    shards: [],
    retries: [],
    inFlight: null,
    totals: { rows: 0, ok: 0, failed: 0, shardsComplete: 0, wallMs: 0 },
  };
}

/**
 * The shard records whose failures are still open: those of the main shards, or, once a retry round
 * completed, that round's (a round retries every open failure, so its failures replace the earlier ones).
 */
export function openFailureShards(m: BatchManifest): readonly ShardRecord[] {
  const lastComplete = m.retries.findLast((r) => r.complete);
  return lastComplete ? lastComplete.shards : m.shards;
}

/** The run's totals from its shard records; `wallMs` is the run's wall time over all invocations. */
export function runTotals(m: BatchManifest, wallMs: number): RunTotals {
  const ok = [...m.shards, ...m.retries.flatMap((r) => r.shards)].reduce((n, s) => n + s.ok, 0);
  const baseFailed = openFailureShards(m).reduce((n, s) => n + s.failures, 0);
  const open = m.retries.at(-1);
  const recoveredInOpenRound = open && !open.complete ? open.shards.reduce((n, s) => n + s.ok, 0) : 0;
  return {
    rows: m.shards.reduce((n, s) => n + s.rows, 0),
    ok,
    failed: baseFailed - recoveredInOpenRound,
    shardsComplete: m.shards.length,
    wallMs,
  };
}

export async function readManifest(dir: string): Promise<BatchManifest | null> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (cause) {
    throw new SluiceError(
      "INPUT_INVALID",
      `${join(dir, MANIFEST_FILE)} is not valid JSON; it is written atomically, so it was edited by hand: restore it or start a new run with --new-run`,
      { cause },
    );
  }
  const m = parsed as Partial<BatchManifest>;
  if (
    m.formatVersion !== MANIFEST_FORMAT_VERSION ||
    typeof m.runId !== "string" ||
    !Array.isArray(m.shards)
  ) {
    throw new SluiceError(
      "MANIFEST_MISMATCH",
      `${join(dir, MANIFEST_FILE)} has format ${String(m.formatVersion)}, this Sluice writes ${MANIFEST_FORMAT_VERSION}; start a new run with --new-run or a new output directory`,
    );
  }
  return parsed as BatchManifest;
}

export async function writeManifest(dir: string, manifest: BatchManifest): Promise<void> {
  manifest.updatedAt = new Date().toISOString();
  await writeFileAtomic(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
}

/**
 * Refuses to continue a run whose input, model, config or shard size differ from the manifest's:
 * mixing would leave part files computed two different ways under one manifest.
 */
export function assertSameRun(existing: BatchManifest, current: RunIdentity, dir: string): void {
  const diffs: string[] = [];
  const a = existing.input;
  const b = current.input;
  const input = inputChange(a, b);
  if (input === "source") diffs.push(`input ${a.uri} → ${b.uri}`);
  else if (input === "content" && a.kind === "file" && b.kind === "file") {
    diffs.push(`input content (sha256 ${a.sha256.slice(0, 12)} → ${b.sha256.slice(0, 12)})`);
  } else if (input === "ranges") diffs.push("input offset ranges (--from/--to)");
  if (existing.model.name !== current.model.name || existing.model.version !== current.model.version) {
    diffs.push(
      `model ${existing.model.name}@${existing.model.version} → ${current.model.name}@${current.model.version}`,
    );
  } else if (existing.model.tokenizerHash !== current.model.tokenizerHash) diffs.push("tokenizer");
  if (existing.configHash !== current.configHash) {
    const changed = changedConfigKeys(existing.config, current.config);
    diffs.push(`output-affecting config (${changed.join(", ") || "hash"})`);
  }
  if (existing.shardSize !== current.shardSize)
    diffs.push(`shard size ${existing.shardSize} → ${current.shardSize}`);
  if (existing.output.format !== current.output.format) {
    diffs.push(`output format ${existing.output.format} → ${current.output.format}`);
  }
  if (diffs.length > 0) {
    throw new SluiceError(
      "MANIFEST_MISMATCH",
      `${join(dir, MANIFEST_FILE)} belongs to run ${existing.runId} with a different ${diffs.join(", ")}. ` +
        "Refusing to mix outputs: pass --new-run to discard that run's outputs and start over here, or choose a new output directory.",
      { context: { runId: existing.runId, differences: diffs } },
    );
  }
}

/** `YYYYMMDDTHHMMSSZ-xxxxxx`: sortable by start time, unique by the random tail. */
function newRunId(now: Date): string {
  const stamp = now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d+Z$/, "Z");
  return `${stamp}-${randomBytes(3).toString("hex")}`;
}
