import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type BackfillRecord,
  BackfillSubmission,
  RUN_ROW_HEADER,
  type RunWriter,
} from "../../../src/backfill/backfill-submission.js";
import {
  assertRunId,
  decodeRunManifest,
  encodeRunManifest,
  type PlacedRecords,
  type RunManifest,
  withChunk,
} from "../../../src/backfill/run-manifest.js";
import { MODEL_VERSION_HEADER, RUN_ID_HEADER } from "../../../src/contracts/lane.js";
import { isSluiceError } from "../../../src/sluice-error.js";
import { defaultFileSource } from "../../support/batch-defaults.js";

/** What a broker would hold: only committed chunks, each its records plus the manifest. */
interface Log {
  records: BackfillRecord[];
  manifest: RunManifest | null;
  commits: number;
}

/** A RunWriter over `log` that places records on 3 partitions and can "crash" at commit number `failAt`. */
function fakeWriter(
  log: Log,
  failAt?: number,
  refuse: (r: BackfillRecord) => boolean = () => false,
): RunWriter {
  return {
    async open() {
      return log.manifest ? decodeRunManifest(encodeRunManifest(log.manifest), "fake") : null;
    },
    async commitChunk(records, next) {
      if (failAt !== undefined && log.commits + 1 === failAt) throw new Error("crash before commit");
      // Records the "broker" refuses as too large even alone are left out, as KafkaRunWriter does.
      const refused = records
        .filter(refuse)
        .map((r) => ({ row: r.row, code: "PUBLISH_TOO_LARGE", message: `row ${r.row} refused (fake)` }));
      records = records.filter((r) => !refuse(r));
      const byPartition = new Map<number, number>();
      for (const r of records) {
        const p = r.row % 3;
        byPartition.set(p, (byPartition.get(p) ?? 0) + 1);
      }
      const placed: PlacedRecords[] = [...byPartition].map(([partition, count]) => {
        const baseOffset = String(log.records.filter((r) => r.row % 3 === partition).length);
        return { partition, baseOffset, count };
      });
      const manifest = next(placed, refused);
      log.records.push(...records);
      log.manifest = manifest;
      log.commits++;
      return manifest;
    },
    async close() {},
  };
}

const run = {
  runId: "run-1",
  sluice: { version: "test", gitCommit: null },
  topics: { backfill: "bf", results: "res", deadLetters: "dlq" },
  model: { name: "m", expectedVersion: "abcdefabcdef" },
  config: { task: "embedding" },
  configHash: "h1",
};

describe("BackfillSubmission", () => {
  let dir: string;
  let input: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-submit-"));
    input = join(dir, "in.jsonl");
    const lines = Array.from({ length: 25 }, (_, i) => JSON.stringify({ id: `r${i}`, text: `text ${i}` }));
    lines.splice(7, 0, "{not json", JSON.stringify({ text: "no id" }), JSON.stringify({ id: "n", text: 5 }));
    lines.push(JSON.stringify({ id: "big", text: "x".repeat(300) }));
    await writeFile(input, `${lines.join("\n")}\n`);
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const submit = (log: Log, failAt?: number) =>
    new BackfillSubmission({
      source: defaultFileSource(input),
      writer: fakeWriter(log, failAt),
      run,
      codec: "json",
      chunkRows: 4,
      maxRecordBytes: 200,
      submittedIds: async () => log.records.map((r) => r.id),
    }).run();

  it("writes every valid row once, keyed by id with the run and row headers, and records invalid rows", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    const s = await submit(log);
    expect(s.action).toBe("submitted");
    expect(log.records.map((r) => r.id)).toEqual(Array.from({ length: 25 }, (_, i) => `r${i}`));
    expect(log.records[0]?.headers[RUN_ID_HEADER]).toBe("run-1");
    expect(log.records[9]?.headers[RUN_ROW_HEADER]).toBe(String(log.records[9]?.row));
    const m = log.manifest!;
    expect(m).toMatchObject({ status: "submitted", rowsRead: 29, rowsSubmitted: 25, rowsInvalid: 4 });
    expect(m.invalid.map((i) => i.code)).toEqual([
      "DECODE_FAILED",
      "MISSING_ID",
      "INVALID_TEXT",
      "PAYLOAD_TOO_LARGE",
    ]);
    expect(m.input).toMatchObject({ kind: "file", rows: 29 });
    expect(m.partitions.reduce((n, p) => n + p.records, 0)).toBe(25);
    expect(m.transactions).toBe(log.commits);
  });

  it("a missing input file is INPUT_INVALID before the writer opens (nothing touches Kafka)", async () => {
    let opened = false;
    const writer = { ...fakeWriter({ records: [], manifest: null, commits: 0 }) };
    writer.open = async () => {
      opened = true;
      return null;
    };
    const error = await new BackfillSubmission({
      source: defaultFileSource(join(dir, "nope.jsonl")),
      writer,
      run,
      codec: "json",
      chunkRows: 4,
      maxRecordBytes: 200,
    })
      .run()
      .catch((e: unknown) => e);
    expect(isSluiceError(error) && error.code).toBe("INPUT_INVALID");
    expect((error as Error).message).toMatch(/cannot read input file .*nope\.jsonl: check the --input path/);
    expect(opened).toBe(false);
  });

  it("a candidate run (--model candidate) puts its version on every row; resuming with the other model is refused", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    const candidateRun = { ...run, model: { ...run.model, role: "candidate" as const } };
    const go = (r: typeof run) =>
      new BackfillSubmission({
        source: defaultFileSource(input),
        writer: fakeWriter(log, 2),
        run: r,
        codec: "json",
        chunkRows: 4,
        maxRecordBytes: 200,
        submittedIds: async () => log.records.map((x) => x.id),
      }).run();
    await expect(go(candidateRun)).rejects.toThrow();
    expect(log.records.length).toBeGreaterThan(0);
    expect(log.records.every((x) => x.headers[MODEL_VERSION_HEADER] === "abcdefabcdef")).toBe(true);
    expect(log.manifest?.model.role).toBe("candidate");
    await expect(go(run)).rejects.toThrow(/--model candidate, not serving/);
    const other = { ...candidateRun, model: { ...candidateRun.model, expectedVersion: "999999999999" } };
    await expect(go(other)).rejects.toThrow(/candidate version abcdefabcdef/);
  });

  it("a serving run's rows carry no model version (they get the version online answers with)", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    await submit(log);
    expect(log.records.some((x) => MODEL_VERSION_HEADER in x.headers)).toBe(false);
  });

  it("records a row the writer's broker refuses as too large alone as invalid, and the rest as submitted", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    const s = await new BackfillSubmission({
      source: defaultFileSource(input),
      writer: fakeWriter(log, undefined, (r) => r.id === "r3"),
      run,
      codec: "json",
      chunkRows: 4,
      maxRecordBytes: 200,
    }).run();
    expect(s.rowsWritten).toBe(24);
    expect(log.records.map((r) => r.id)).not.toContain("r3");
    const m = log.manifest!;
    expect(m).toMatchObject({ status: "submitted", rowsRead: 29, rowsSubmitted: 24, rowsInvalid: 5 });
    expect(m.invalid.find((i) => i.code === "PUBLISH_TOO_LARGE")?.row).toBe(3);
  });

  it("after a crash, resubmitting resumes at the committed manifest and adds nothing already there", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    await expect(submit(log, 4)).rejects.toThrow(/crash/);
    expect(log.manifest?.rowsRead).toBe(12); // three committed chunks of 4 input rows
    const resumed = await submit(log);
    expect(resumed).toMatchObject({ action: "resumed", rowsSkipped: 12 });
    const ids = log.records.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(25);
    expect(log.manifest).toMatchObject({
      status: "submitted",
      rowsRead: 29,
      rowsSubmitted: 25,
      rowsInvalid: 4,
    });
  });

  it("a repeated id is invalid (DUPLICATE_ID), also when the first one was submitted before a crash", async () => {
    const rows = ["a", "b", "c", "d", "e", "a", "f", "b"].map((id) =>
      JSON.stringify({ id, text: `t ${id}` }),
    );
    await writeFile(input, `${rows.join("\n")}\n`);
    const log: Log = { records: [], manifest: null, commits: 0 };
    await expect(submit(log, 2)).rejects.toThrow(/crash/); // rows 0-3 committed, then a crash
    await submit(log);
    expect(log.records.map((r) => r.id)).toEqual(["a", "b", "c", "d", "e", "f"]);
    expect(log.manifest?.invalid.map((i) => [i.row, i.code])).toEqual([
      [5, "DUPLICATE_ID"],
      [7, "DUPLICATE_ID"],
    ]);
  });

  it("resubmitting a submitted run writes nothing", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    await submit(log);
    const commits = log.commits;
    const again = await submit(log);
    expect(again).toMatchObject({ action: "already-submitted", rowsWritten: 0 });
    expect(log.commits).toBe(commits);
    expect(log.records).toHaveLength(25);
  });

  it("stops with MANIFEST_MISMATCH naming the file when the input changed", async () => {
    const log: Log = { records: [], manifest: null, commits: 0 };
    await expect(submit(log, 2)).rejects.toThrow(/crash/);
    expect(log.records).toHaveLength(4);
    await writeFile(input, `${JSON.stringify({ id: "other", text: "changed" })}\n`);
    const error = await submit(log).catch((e: unknown) => e);
    expect(isSluiceError(error, "MANIFEST_MISMATCH")).toBe(true);
    expect((error as Error).message).toContain(input);
    expect((error as Error).message).toMatch(/changed since run run-1/);
    expect(log.records).toHaveLength(4); // nothing more was written
  });
});

describe("run manifest", () => {
  const base = (): RunManifest => ({
    formatVersion: 1,
    runId: "r",
    status: "submitting",
    createdAt: "2026-12-01T00:00:00.000Z",
    updatedAt: "2026-12-01T00:00:00.000Z",
    sluice: { version: "t", gitCommit: null },
    input: { kind: "file", uri: "file:///x", format: "jsonl", sha256: "a", sizeBytes: 1, rows: 10 },
    topics: { backfill: "bf", results: "res", deadLetters: "dlq" },
    model: { name: "m", expectedVersion: null },
    config: {},
    configHash: "h",
    rowsRead: 0,
    rowsSubmitted: 0,
    rowsInvalid: 0,
    invalid: [],
    partitions: [],
    transactions: 0,
  });

  it("merges each chunk's placement into per-partition offset ranges", () => {
    let m = withChunk(base(), {
      rowsRead: 5,
      placed: [
        { partition: 1, baseOffset: "10", count: 3 },
        { partition: 0, baseOffset: "0", count: 2 },
      ],
      invalid: [],
    });
    m = withChunk(m, {
      rowsRead: 9,
      placed: [{ partition: 1, baseOffset: "20", count: 3 }],
      invalid: [{ row: 8, code: "MISSING_ID", message: "x" }],
    });
    expect(m.partitions).toEqual([
      { partition: 0, startOffset: "0", endOffset: "2", records: 2 },
      { partition: 1, startOffset: "10", endOffset: "23", records: 6 },
    ]);
    expect(m).toMatchObject({ rowsRead: 9, rowsSubmitted: 8, rowsInvalid: 1, transactions: 2 });
  });

  it("rejects records that are not manifests, and other formats", () => {
    expect(() => decodeRunManifest(Buffer.from("{x"), "runs/0@3")).toThrow(/runs\/0@3 is not valid JSON/);
    expect(() => decodeRunManifest(Buffer.from("{}"), "runs/0@3")).toThrow(/not a Sluice run manifest/);
    const future = { ...base(), formatVersion: 9 };
    expect(() => decodeRunManifest(encodeRunManifest(future), "runs/0@3")).toThrow(/format 9/);
  });

  it("accepts run ids of Kafka's topic alphabet only", () => {
    expect(() => assertRunId("reembed-2026.12_01")).not.toThrow();
    for (const bad of ["", "has space", "a/b", "x".repeat(101)]) {
      expect(() => assertRunId(bad)).toThrow(/--run-id/);
    }
  });
});
