import { describe, expect, it } from "vitest";
import type { BatchManifest, ShardRecord } from "../../../src/batch/batch-manifest.js";
import type { FailureRecord } from "../../../src/batch/batch-sink.js";
import { runShardLoop, type ShardUnit } from "../../../src/batch/shard-loop.js";
import { mainPass, retryPass, retryRoundToRun, type ShardPass } from "../../../src/batch/shard-pass.js";
import type { SourceRow } from "../../../src/runs/row-source.js";
import { isSluiceError } from "../../../src/sluice-error.js";

/** A manifest of a file input of `rows` rows, nothing done yet. */
function manifest(rows: number): BatchManifest {
  return {
    formatVersion: 1,
    runId: "run",
    status: "running",
    createdAt: "",
    updatedAt: "",
    sluice: { version: "t", gitCommit: null },
    input: { kind: "file", uri: "file:///in.jsonl", format: "jsonl", sha256: "f", sizeBytes: 1, rows },
    output: { uri: "file:///out", format: "jsonl" },
    model: { name: "m", version: "v", task: "embedding", tokenizerHash: null },
    config: {},
    configHash: "h",
    shardSize: 4,
    shards: [],
    retries: [],
    inFlight: null,
    totals: { rows: 0, ok: 0, failed: 0, shardsComplete: 0, wallMs: 0 },
  };
}

function items(n: number): SourceRow[] {
  return Array.from({ length: n }, (_, row) => ({ row, id: `id-${row}`, text: `t${row}`, attributes: null }));
}

async function* iterate(list: readonly SourceRow[]): AsyncGenerator<SourceRow> {
  yield* list;
}

/** Runs the loop over `list`, recording each unit as fully ok in the pass, as BatchJob does. */
async function run(pass: ShardPass, list: readonly SourceRow[], stopAfter = Number.POSITIVE_INFINITY) {
  const units: ShardUnit[] = [];
  const result = await runShardLoop(pass, 4, {
    items: () => iterate(list),
    async processShard(unit) {
      units.push(unit);
      const record = shardRecord(unit.name, unit.rowStart, unit.rowEnd, unit.items.length);
      pass.records.push(record);
      return record;
    },
    stopRequested: () => units.length >= stopAfter,
  });
  return { result, units };
}

function shardRecord(key: string, rowStart: number, rowEnd: number, rows: number): ShardRecord {
  return {
    key,
    rowStart,
    rowEnd,
    rows,
    ok: rows,
    failures: 0,
    output: `${key}.jsonl`,
    sha256: "s",
    failuresFile: null,
    startedAt: "",
    finishedAt: "",
    durationMs: 0,
  };
}

const rowsOf = (u: ShardUnit) => u.items.map((i) => i.row);

describe("runShardLoop", () => {
  it("main pass: cuts every row into shards of S, in input order, named part-NNNNN", async () => {
    const m = manifest(10);
    const pass = mainPass(m, 4);
    const { result, units } = await run(pass, items(10));
    expect(units.map((u) => [u.name, u.rowStart, u.rowEnd])).toEqual([
      ["part-00000", 0, 4],
      ["part-00001", 4, 8],
      ["part-00002", 8, 10],
    ]);
    expect(units.map(rowsOf)).toEqual([
      [0, 1, 2, 3],
      [4, 5, 6, 7],
      [8, 9],
    ]);
    expect(result).toEqual({ ok: 10, shards: 3, rowsRead: 10, interrupted: false });
    expect(pass.totalRows).toBe(10);
    pass.complete(result.rowsRead);
    expect(m.status).toBe("complete");
  });

  it("resume: skips the units already recorded and scores only the others", async () => {
    const m = manifest(10);
    m.shards.push(shardRecord("part-00000", 0, 4, 4), shardRecord("part-00002", 8, 10, 2));
    const pass = mainPass(m, 4);
    expect(pass.doneRows).toBe(6);
    const { result, units } = await run(pass, items(10));
    expect(units.map((u) => u.name)).toEqual(["part-00001"]);
    expect(units.map(rowsOf)).toEqual([[4, 5, 6, 7]]);
    expect(result).toEqual({ ok: 4, shards: 1, rowsRead: 10, interrupted: false });
  });

  it("stops between units once asked, after at least one unit, and reports the pass as interrupted", async () => {
    const m = manifest(12);
    const first = await run(mainPass(m, 4), items(12), 1);
    expect(first.units.map((u) => u.name)).toEqual(["part-00000"]);
    expect(first.result.interrupted).toBe(true);
    const rest = await run(mainPass(m, 4), items(12));
    expect(rest.units.map((u) => u.name)).toEqual(["part-00001", "part-00002"]);
    expect(m.shards.map((s) => s.key)).toEqual(["part-00000", "part-00001", "part-00002"]);
  });

  it("retry round: only the open failures, in units of S failed rows, named retry-RR-part-NNNNN", async () => {
    const m = manifest(20);
    const open = new Map<number, FailureRecord>(
      [1, 3, 4, 9, 12, 18].map((row) => [row, { id: `id-${row}`, row, code: "E", message: "m" }]),
    );
    const round = retryRoundToRun(m, open.size)!;
    expect(round).toMatchObject({ round: 1, rowsAttempted: 6, complete: false });
    expect(m.retries).toEqual([round]);
    const pass = retryPass(round, open, 4);
    expect(pass.totalRows).toBe(6);
    const { result, units } = await run(pass, items(20));
    expect(units.map((u) => [u.name, u.rowStart, u.rowEnd])).toEqual([
      ["retry-01-part-00000", 0, 4],
      ["retry-01-part-00001", 4, 6],
    ]);
    expect(units.map(rowsOf)).toEqual([
      [1, 3, 4, 9],
      [12, 18],
    ]);
    expect(result).toMatchObject({ ok: 6, shards: 2, interrupted: false });
    expect(m.shards).toEqual([]); // a round records its units in the round, not with the main shards
    expect(round.shards.map((s) => s.key)).toEqual(["retry-01-part-00000", "retry-01-part-00001"]);
    pass.complete(result.rowsRead);
    expect(round.complete).toBe(true);
    expect(retryRoundToRun(m, 0)).toBeNull(); // nothing open: no new round
  });

  it("retry round: resumes the unfinished round without rescoring its done units", async () => {
    const m = manifest(20);
    const open = new Map<number, FailureRecord>(
      [2, 5, 7, 11, 13].map((row) => [row, { id: `id-${row}`, row, code: "E", message: "m" }]),
    );
    const round = retryRoundToRun(m, open.size)!;
    round.shards.push(shardRecord("retry-01-part-00000", 0, 4, 4));
    expect(retryRoundToRun(m, open.size)).toBe(round); // the unfinished round, not a new one
    const pass = retryPass(round, open, 4);
    expect(pass.doneRows).toBe(4);
    const { units } = await run(pass, items(20));
    expect(units.map((u) => u.name)).toEqual(["retry-01-part-00001"]);
    expect(units.map(rowsOf)).toEqual([[13]]);
  });

  it("retry round: a row whose id differs from its failure's stops with MANIFEST_MISMATCH", async () => {
    const m = manifest(5);
    const open = new Map<number, FailureRecord>([[2, { id: "other", row: 2, code: "E", message: "m" }]]);
    const pass = retryPass(retryRoundToRun(m, 1)!, open, 4);
    const error = await run(pass, items(5)).catch((e: unknown) => e);
    expect(isSluiceError(error, "MANIFEST_MISMATCH")).toBe(true);
    expect((error as Error).message).toMatch(/input changed.*--new-run/);
  });
});
