import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * What ties a run's outputs to what produced them (docs/design.md §5.5): the input's identity, the model,
 * the settings that change output bytes, and the Sluice that ran. The batch manifest, the backfill run
 * manifest and the backfill export manifest all carry these fields under these names; they differ only
 * in what they know about the model (`Model`). backfill/ imports this module from batch/ (never the
 * other way round).
 */
export interface RunProvenance<Model> {
  sluice: SluiceBuild;
  /** Input identity: SHA-256, size and rows of a file, or the fixed offset ranges of a topic. */
  input: InputDescription;
  model: Model;
  /** Settings that change output bytes (tokenisation, truncation, pooling, task, prefix, fields, format). */
  config: Record<string, unknown>;
  /** SHA-256 of `config` in canonical JSON (`hashConfig`). */
  configHash: string;
}

/** The Sluice that wrote a manifest; `gitCommit` is best effort (null outside a checkout). */
export interface SluiceBuild {
  version: string;
  gitCommit: string | null;
}

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

/**
 * How the input of a resumed run differs from the one recorded: another file or topic (`source`), the
 * same file with other bytes (`content`), or other offset ranges of the same topic (`ranges`); null
 * when it is the same input. Each manifest words its refusal itself.
 */
export function inputChange(
  recorded: InputDescription,
  current: InputDescription,
): "source" | "content" | "ranges" | null {
  if (recorded.kind !== current.kind || recorded.uri !== current.uri) return "source";
  if (recorded.kind === "file" && current.kind === "file") {
    return recorded.sha256 === current.sha256 ? null : "content";
  }
  if (recorded.kind === "kafka" && current.kind === "kafka") {
    const same =
      canonicalJson(recorded.spec) === canonicalJson(current.spec) &&
      canonicalJson(recorded.ranges) === canonicalJson(current.ranges);
    return same ? null : "ranges";
  }
  return null;
}

/** The top-level keys whose values differ between two output configs (for a mismatch message). */
export function changedConfigKeys(
  recorded: Record<string, unknown>,
  current: Record<string, unknown>,
): string[] {
  return [...new Set([...Object.keys(recorded), ...Object.keys(current)])].filter(
    (k) => canonicalJson(recorded[k]) !== canonicalJson(current[k]),
  );
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

/** Package version and git commit of the running Sluice; the commit is best effort. */
export function sluiceBuild(): SluiceBuild {
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
  // src/runs/<module>.ts and dist/src/runs/<module>.js: walk up until a package.json appears.
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
