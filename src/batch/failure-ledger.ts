import { mkdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../runs/atomic-file.js";
import { partFileName } from "../runs/part-name.js";
import { type BatchManifest, openFailureShards, type ShardRecord } from "./batch-manifest.js";
import type { FailureRecord } from "./batch-sink.js";

/** Every open failure once, by row, regenerated at the end of every invocation. */
export const FAILURES_FILE = "failures.jsonl";
/** Per-shard failure files: `failures/<part name>.jsonl`. */
const FAILURES_DIR = "failures";

/**
 * The failure files of a batch run in its state directory. Which failures are open is the manifest's
 * rule (`openFailureShards`); this keeps their rows: one file per shard, written before the shard is
 * recorded (a crash in between just rewrites the same file), and `failures.jsonl`, the summary.
 */
export class FailureLedger {
  constructor(private readonly stateDir: string) {}

  async prepare(): Promise<void> {
    await mkdir(join(this.stateDir, FAILURES_DIR), { recursive: true });
  }

  /** Writes a shard's failures (sorted by row); returns the file relative to the state dir, or null for none. */
  async writeShard(name: string, failures: readonly FailureRecord[]): Promise<string | null> {
    if (failures.length === 0) return null;
    const file = `${FAILURES_DIR}/${partFileName(name, "jsonl")}`;
    const sorted = [...failures].sort((a, b) => a.row - b.row);
    await writeFileAtomic(join(this.stateDir, file), lines(sorted));
    return file;
  }

  /** The run's open failures by row. */
  async open(manifest: BatchManifest): Promise<Map<number, FailureRecord>> {
    const open = new Map<number, FailureRecord>();
    for (const s of openFailureShards(manifest)) {
      if (!s.failuresFile) continue;
      const text = await readFile(join(this.stateDir, s.failuresFile), "utf8");
      for (const line of text.split("\n")) {
        if (!line) continue;
        const f = JSON.parse(line) as FailureRecord;
        open.set(f.row, f);
      }
    }
    return open;
  }

  /** Rewrites failures.jsonl from the per-shard failure files: every open failure once, by row. */
  async writeSummary(manifest: BatchManifest): Promise<void> {
    const open = [...(await this.open(manifest)).values()].sort((a, b) => a.row - b.row);
    await writeFileAtomic(join(this.stateDir, FAILURES_FILE), lines(open));
  }

  /** Deletes the failure files of `shards` and the summary (for --new-run). */
  async discard(shards: readonly ShardRecord[]): Promise<void> {
    for (const s of shards) {
      if (s.failuresFile) await rm(join(this.stateDir, s.failuresFile), { force: true });
    }
    await rm(join(this.stateDir, FAILURES_FILE), { force: true });
  }
}

/** Failure lines with exactly these fields, in this order. */
function lines(failures: readonly FailureRecord[]): string {
  return failures
    .map((f) => `${JSON.stringify({ id: f.id, row: f.row, code: f.code, message: f.message })}\n`)
    .join("");
}
