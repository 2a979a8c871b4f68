import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SluiceError } from "../sluice-error.js";
import { writeFileAtomic } from "./atomic-file.js";
import type { InFlightShard } from "./batch-sink.js";

/**
 * `manifest.json`: what a batch run read, with which model and config, and which shards are done.
 * It is the run's only checkpoint: a shard counts as done once it is listed here (docs/batch-mode.md).
 */
export const MANIFEST_FILE = "manifest.json";
export const MANIFEST_FORMAT_VERSION = 1;

export type InputDescription =
  | {
      kind: "file";
      uri: string;
      format: "jsonl" | "csv";
      sha256: string;
      sizeBytes: number;
      /** Data rows (CSV header excluded). */
      rows: number;
    }
  | {
      kind: "kafka";
      uri: string;
      topic: string;
      /** Half-open offset range per partition, fixed when the run started. */
      ranges: { partition: number; startOffset: string; endOffset: string }[];
      /** `--from` / `--to` as given; a resumed run with the same spec reuses `ranges`. */
      spec: { from: string | null; to: string | null };
      /** Committed records in the ranges; known once a run has read everything (null before). */
      rows: number | null;
    };

export interface ModelDescription {
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

export interface BatchManifest {
  formatVersion: number;
  runId: string;
  status: "running" | "complete";
  createdAt: string;
  updatedAt: string;
  sluice: { version: string; gitCommit: string | null };
  input: InputDescription;
  output: { uri: string; format: string };
  model: ModelDescription;
  /** SHA-256 of `config` in canonical JSON. */
  configHash: string;
  /** Settings that change output bytes (tokenisation, truncation, pooling, task, prefix, fields, format). */
  config: Record<string, unknown>;
  shardSize: number;
  shards: ShardRecord[];
  retries: RetryRound[];
  /** Shard being written to a topic output; resume checks whether its transaction committed. */
  inFlight: (InFlightShard & { round: number | null; pending: ShardRecord }) | null;
  totals: { rows: number; ok: number; failed: number; shardsComplete: number; wallMs: number };
}

/** Canonical JSON (sorted keys) so equal settings always hash equal. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.entries(value as Record<string, unknown>)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
}

export function hashConfig(config: Record<string, unknown>): string {
  return createHash("sha256").update(canonicalJson(config)).digest("hex");
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
export function assertSameRun(
  existing: BatchManifest,
  current: Pick<BatchManifest, "input" | "model" | "configHash" | "config" | "shardSize" | "output">,
  dir: string,
): void {
  const diffs: string[] = [];
  const a = existing.input;
  const b = current.input;
  if (a.kind !== b.kind || a.uri !== b.uri) diffs.push(`input ${a.uri} → ${b.uri}`);
  else if (a.kind === "file" && b.kind === "file" && a.sha256 !== b.sha256) {
    diffs.push(`input content (sha256 ${a.sha256.slice(0, 12)} → ${b.sha256.slice(0, 12)})`);
  } else if (
    a.kind === "kafka" &&
    b.kind === "kafka" &&
    (canonicalJson(a.spec) !== canonicalJson(b.spec) || canonicalJson(a.ranges) !== canonicalJson(b.ranges))
  ) {
    diffs.push("input offset ranges (--from/--to)");
  }
  if (existing.model.name !== current.model.name || existing.model.version !== current.model.version) {
    diffs.push(
      `model ${existing.model.name}@${existing.model.version} → ${current.model.name}@${current.model.version}`,
    );
  } else if (existing.model.tokenizerHash !== current.model.tokenizerHash) diffs.push("tokenizer");
  if (existing.configHash !== current.configHash) {
    const now = current.config;
    const changed = [...new Set([...Object.keys(existing.config), ...Object.keys(now)])].filter(
      (k) => canonicalJson(existing.config[k]) !== canonicalJson(now[k]),
    );
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

/** Package version and git commit for provenance; the commit is best effort (null outside a checkout). */
export function sluiceProvenance(): { version: string; gitCommit: string | null } {
  const root = packageRootDir();
  let version = "unknown";
  try {
    version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    // keep "unknown"
  }
  let gitCommit: string | null = null;
  try {
    const out = execFileSync("git", ["rev-parse", "HEAD"], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 5000,
    }).trim();
    if (/^[0-9a-f]{40}$/.test(out)) gitCommit = out;
  } catch {
    // not a checkout or no git binary
  }
  return { version, gitCommit };
}

function packageRootDir(): string {
  // src/batch/x.ts and dist/src/batch/x.js: walk up until a package.json appears.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    try {
      readFileSync(join(dir, "package.json"));
      return dir;
    } catch {
      dir = dirname(dir);
    }
  }
  return process.cwd();
}
