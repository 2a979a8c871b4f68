import type { RunManifest } from "../backfill/run-manifest.js";
import type { GroupOffsetsReader, PartitionOffsets } from "./group-offsets-reader.js";

/** One backfill run as the live page lists it. Counts only: never ids or text. */
export interface RunRow {
  runId: string;
  /** submitting: rows still being written; running: submitted, not all consumed; done. */
  state: "submitting" | "running" | "done";
  /** Rows the serve group has consumed and committed (from its committed offsets; see `runProgress`). */
  rowsDone: number;
  /** Input rows; null while a topic input is still being submitted. */
  rowsTotal: number | null;
  rowsSubmitted: number;
  /** Rows refused at submit (no id, undecodable, too large): failed before any scoring. */
  rowsInvalid: number;
  /** Rows done per second over the last minute of page requests; null before two looks. */
  rowsPerSec: number | null;
  etaSeconds: number | null;
  updatedAt: string;
}

export interface RunBoardView {
  at: number;
  runs: RunRow[];
  /** Why the runs could not be read (e.g. no ACL on topics.runs); the rows are then the last known. */
  error?: string;
}

/** Port: every backfill run's last committed manifest (the compacted `topics.runs`). */
export interface RunManifestSource {
  manifests(): Promise<RunManifest[]>;
}

export interface BackfillRunBoardOptions {
  source: RunManifestSource;
  offsets: GroupOffsetsReader;
  /** The serve group, whose committed offsets on the backfill topic say how far each run is. */
  groupId: string;
  /** A view younger than this is served again without reading the broker, ms. Default 2000. */
  cacheMs?: number;
  /** Longest a view waits for a read under way before it answers with the last view, ms. Default 1000. */
  waitMs?: number;
  /** Runs listed, most recently updated first. Default 10. */
  maxRuns?: number;
  nowMs?: () => number;
}

/** Rate window, ms: the rate is measured over what changed in the last minute. */
const RATE_WINDOW_MS = 60_000;

/**
 * The live page's runs table. It adds no source of truth: a run's manifest (what was submitted
 * where) comes from the runs topic, and its progress from the serve group's committed offsets on the
 * backfill partitions the manifest names, both read only when the page asks (at most once per
 * `cacheMs`). Failures of scored rows are not read here (that takes the results topic; see
 * `sluice backfill status`).
 */
export class BackfillRunBoard {
  private readonly cacheMs: number;
  private readonly waitMs: number;
  private readonly maxRuns: number;
  private readonly nowMs: () => number;
  private cached: RunBoardView | undefined;
  private pending: Promise<RunBoardView> | undefined;
  /** Per run, (time, rows done) of recent looks, for the rate. */
  private readonly history = new Map<string, { at: number; done: number }[]>();

  constructor(private readonly opts: BackfillRunBoardOptions) {
    this.cacheMs = opts.cacheMs ?? 2000;
    this.waitMs = opts.waitMs ?? 1000;
    this.maxRuns = opts.maxRuns ?? 10;
    this.nowMs = opts.nowMs ?? Date.now;
  }

  /**
   * The current view; concurrent callers share one read. A read slower than `waitMs` (a slow broker,
   * the first read of a long runs topic) does not hold the page up: the last view is answered, and
   * the read's result serves the next look.
   */
  async view(): Promise<RunBoardView> {
    const now = this.nowMs();
    if (this.cached && now - this.cached.at < this.cacheMs) return this.cached;
    this.pending ??= this.read().finally(() => {
      this.pending = undefined;
    });
    const fallback = this.cached ?? { at: now, runs: [], error: "reading topics.runs; not read yet" };
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<RunBoardView>((resolve) => {
      timer = setTimeout(() => resolve(fallback), this.waitMs);
    });
    try {
      return await Promise.race([this.pending, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async read(): Promise<RunBoardView> {
    const at = this.nowMs();
    try {
      const manifests = (await this.opts.source.manifests())
        .sort((a, b) => b.updatedAt.localeCompare(a.updatedAt))
        .slice(0, this.maxRuns);
      const topics = [...new Set(manifests.map((m) => m.topics.backfill))];
      const offsets = topics.length
        ? await this.opts.offsets.partitionOffsets(this.opts.groupId, topics)
        : [];
      const runs = manifests.map((m) => this.row(m, runProgress(m, offsets), at));
      this.cached = { at, runs };
    } catch (error) {
      this.cached = { at, runs: this.cached?.runs ?? [], error: (error as Error).message };
    }
    return this.cached;
  }

  private row(m: RunManifest, done: number, at: number): RunRow {
    const total = m.status === "submitted" ? m.rowsRead : m.input.kind === "file" ? m.input.rows : null;
    const rowsDone = done + m.rowsInvalid;
    const past = (this.history.get(m.runId) ?? []).filter((h) => at - h.at <= RATE_WINDOW_MS);
    past.push({ at, done: rowsDone });
    this.history.set(m.runId, past);
    const oldest = past[0] as { at: number; done: number };
    const rate = at > oldest.at ? ((rowsDone - oldest.done) * 1000) / (at - oldest.at) : null;
    const finished = m.status === "submitted" && total !== null && rowsDone >= total;
    const remaining = total === null ? null : Math.max(0, total - rowsDone);
    return {
      runId: m.runId,
      state: m.status === "submitting" ? "submitting" : finished ? "done" : "running",
      rowsDone,
      rowsTotal: total,
      rowsSubmitted: m.rowsSubmitted,
      rowsInvalid: m.rowsInvalid,
      rowsPerSec: rate,
      etaSeconds: finished ? 0 : remaining !== null && rate ? Math.round(remaining / rate) : null,
      updatedAt: m.updatedAt,
    };
  }
}

/**
 * Rows of a run the group has committed, from its committed offset on each partition the run's
 * manifest names: all of a partition's rows once the offset passes the run's end offset there, else
 * the offsets passed since its start offset (transaction markers and other runs' records interleaved
 * in the range make this an upper bound while the run is under way; it is exact once it is done). Pure.
 */
export function runProgress(m: RunManifest, offsets: readonly PartitionOffsets[]): number {
  let done = 0;
  for (const range of m.partitions) {
    const o = offsets.find((x) => x.topic === m.topics.backfill && x.partition === range.partition);
    if (!o?.committedOffset) continue;
    const committed = BigInt(o.committedOffset);
    const start = BigInt(range.startOffset);
    if (committed >= BigInt(range.endOffset)) done += range.records;
    else if (committed > start) done += Math.min(range.records, Number(committed - start));
  }
  return done;
}
