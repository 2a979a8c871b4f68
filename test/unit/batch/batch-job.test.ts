import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import avro from "avsc";
import { afterAll, describe, expect, it } from "vitest";
import { BatchJob, type BatchJobOptions } from "../../../src/batch/batch-job.js";
import type { BatchManifest } from "../../../src/batch/batch-manifest.js";
import { PartFileSink } from "../../../src/batch/part-file-sink.js";
import type { ItemOutcome, ModelPort } from "../../../src/model/model-port.js";
import { isSluiceError } from "../../../src/sluice-error.js";
import { defaultFileSource, defaultJobOptions } from "../../support/batch-defaults.js";
import { failingIds } from "../../support/batch-seams.js";

/**
 * A deterministic in-process ModelPort (the ONNX seam, docs/design.md §6.11): embedding = [length, word
 * count, char-code sum mod 97]. Engine behaviour (shards, resume, retries) is what is under test here;
 * the real ONNX path is covered by the e2e tests.
 */
class FakeModel implements ModelPort {
  readonly identity = { name: "fake", version: "v1" };
  readonly task = "embedding" as const;
  calls: unknown[][] = [];
  failOnCall: number | null = null;
  countTokens(text: string): number {
    return text.split(/\s+/).filter(Boolean).length + 2;
  }
  async run(texts: readonly unknown[]) {
    this.calls.push([...texts]);
    if (this.failOnCall !== null && this.calls.length >= this.failOnCall) throw new Error("worker crashed");
    const outcomes: ItemOutcome[] = texts.map((t) => {
      if (typeof t !== "string") return { ok: false, code: "INVALID_TEXT", message: "text is not a string" };
      if (t.trim() === "") return { ok: false, code: "EMPTY_TEXT", message: "text is empty" };
      let sum = 0;
      for (const c of t) sum += c.charCodeAt(0);
      return {
        ok: true,
        output: { embedding: [t.length, this.countTokens(t) - 2, sum % 97] },
        tokens: 3,
        truncated: false,
      };
    });
    return { outcomes, stats: { inferenceMs: 1, realTokens: 0, paddedTokens: 0 } };
  }
  async close() {}
}

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "sluice-batch-"));
  dirs.push(d);
  return d;
}
afterAll(async () => {
  const { rm } = await import("node:fs/promises");
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

const words = ["alpha", "beta", "gamma", "delta", "epsilon"];
function jsonlInput(n: number, opts: { empty?: number[] } = {}): string {
  return Array.from({ length: n }, (_, i) => {
    const text = opts.empty?.includes(i)
      ? ""
      : Array.from({ length: 1 + (i % 5) }, (_, j) => words[(i + j) % 5]).join(" ");
    return JSON.stringify({ id: `id-${i}`, text });
  }).join("\n");
}

function job(input: string, out: string, model: ModelPort, extra: Partial<BatchJobOptions> = {}) {
  return new BatchJob({
    source: defaultFileSource(input),
    sink: new PartFileSink({ dir: out, format: "jsonl" }),
    model,
    stateDir: out,
    ...defaultJobOptions,
    shardSize: 10,
    batchSize: 4,
    outputConfig: { task: "embedding", pooling: "cls", maxSequenceTokens: 256, textPrefix: "" },
    ...extra,
  });
}

async function readParts(dir: string): Promise<{ name: string; bytes: Buffer }[]> {
  const names = (await readdir(dir)).filter((n) => /^(retry-\d+-)?part-\d+\.jsonl$/.test(n)).sort();
  return Promise.all(names.map(async (name) => ({ name, bytes: await readFile(join(dir, name)) })));
}
async function okIds(dir: string): Promise<string[]> {
  const parts = await readParts(dir);
  return parts.flatMap((p) =>
    p.bytes
      .toString("utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => (JSON.parse(l) as { id: string }).id),
  );
}
async function failureIds(dir: string): Promise<string[]> {
  const text = await readFile(join(dir, "failures.jsonl"), "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);
}
async function manifest(dir: string): Promise<BatchManifest> {
  return JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as BatchManifest;
}

describe("BatchJob over files", () => {
  it("splits into shards, writes parts in input order, and records a complete manifest", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(25));
    const out = join(d, "out");
    const model = new FakeModel();
    const summary = await job(input, out, model).run();
    expect(summary.action).toBe("ran");
    expect(summary.rowsOk).toBe(25);
    const parts = await readParts(out);
    expect(parts.map((p) => p.name)).toEqual(["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]);
    expect(await okIds(out)).toEqual(Array.from({ length: 25 }, (_, i) => `id-${i}`));
    const m = await manifest(out);
    expect(m.status).toBe("complete");
    expect(m.input).toMatchObject({ kind: "file", format: "jsonl", rows: 25 });
    expect(m.input.kind === "file" && m.input.sha256).toBe(
      createHash("sha256")
        .update(await readFile(input))
        .digest("hex"),
    );
    expect(m.model).toEqual({ name: "fake", version: "v1", task: "embedding", tokenizerHash: null });
    expect(m.shards.map((s) => [s.rowStart, s.rowEnd, s.rows])).toEqual([
      [0, 10, 10],
      [10, 20, 10],
      [20, 25, 5],
    ]);
    for (const [i, s] of m.shards.entries()) {
      expect(s.sha256).toBe(createHash("sha256").update(parts[i]!.bytes).digest("hex"));
    }
    expect(m.totals).toMatchObject({ rows: 25, ok: 25, failed: 0, shardsComplete: 3 });
    expect(m.sluice.version).toMatch(/^\d+\.\d+\.\d+/);
    // Batches are fixed size (4) and length-sorted within a shard: the first call holds the shortest texts.
    expect(model.calls.every((c) => c.length <= 4)).toBe(true);
    const firstLens = model.calls[0]!.map((t) => String(t).split(" ").length);
    expect(Math.max(...firstLens)).toBeLessThanOrEqual(
      Math.min(...model.calls[1]!.map((t) => String(t).split(" ").length)),
    );
  });

  it("removes temporary files left by a crash in the middle of a part write", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(5));
    const out = join(d, "out");
    const { mkdir } = await import("node:fs/promises");
    await mkdir(out, { recursive: true });
    await writeFile(join(out, "part-00000.jsonl.tmp"), '{"id":"half-writ');
    await job(input, out, new FakeModel()).run();
    expect((await readdir(out)).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    expect(await okIds(out)).toEqual(["id-0", "id-1", "id-2", "id-3", "id-4"]);
  });

  it("a second identical run writes nothing and says so", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(12));
    const out = join(d, "out");
    await job(input, out, new FakeModel()).run();
    const before = await manifest(out);
    const model = new FakeModel();
    const again = await job(input, out, model).run();
    expect(again.action).toBe("nothing-to-do");
    expect(again.message).toMatch(/already complete.*nothing to do/);
    expect(model.calls).toHaveLength(0);
    expect((await manifest(out)).updatedAt).toBe(before.updatedAt);
  });

  it("is deterministic: the same input gives byte-identical part files", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(23));
    await job(input, join(d, "a"), new FakeModel()).run();
    await job(input, join(d, "b"), new FakeModel(), { maxInFlightBatches: 1 }).run();
    const a = await readParts(join(d, "a"));
    const b = await readParts(join(d, "b"));
    expect(a.length).toBe(3);
    expect(b.map((p) => p.bytes.toString("hex"))).toEqual(a.map((p) => p.bytes.toString("hex")));
    expect(a[0]!.bytes.toString()).not.toMatch(/At"|Ms"|timestamp/i);
  });

  it("resumes after a crash from the completed shards without duplicating rows", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(30));
    const out = join(d, "out");
    const crashing = new FakeModel();
    crashing.failOnCall = 4; // 10 rows / batch 4 = 3 calls per shard: dies inside shard 1
    await expect(job(input, out, crashing).run()).rejects.toThrow(/worker crashed/);
    const mid = await manifest(out);
    expect(mid.status).toBe("running");
    expect(mid.shards.map((s) => s.key)).toEqual(["part-00000"]);

    const model = new FakeModel();
    const summary = await job(input, out, model).run();
    expect(summary.rowsSkipped).toBe(10);
    expect(summary.rowsOk).toBe(20);
    expect(model.calls.flat()).toHaveLength(20);
    const ids = await okIds(out);
    expect(ids).toEqual(Array.from({ length: 30 }, (_, i) => `id-${i}`));
    expect((await manifest(out)).status).toBe("complete");
  });

  it("stop() ends the run after the shard in progress; the same command then resumes", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(35));
    const out = join(d, "out");
    let stopper: BatchJob | null = null;
    const first = job(input, out, new FakeModel(), {
      progress: {
        start() {},
        advance() {
          stopper?.stop(); // as a SIGINT handler would, while shard 0 is being scored
        },
        finish() {},
      },
    });
    stopper = first;
    const summary = await first.run();
    expect(summary.action).toBe("interrupted");
    expect(summary.message).toMatch(/stopped on request after 1 shard.*run the same command to resume/);
    const mid = await manifest(out);
    expect(mid.status).toBe("running");
    expect(mid.shards.map((s) => s.key)).toEqual(["part-00000"]);

    const rest = await job(input, out, new FakeModel()).run();
    expect(rest.action).toBe("ran");
    expect(rest.rowsSkipped).toBe(10);
    expect(await okIds(out)).toEqual(Array.from({ length: 35 }, (_, i) => `id-${i}`));
  });

  it("sends failures to failures.jsonl and --retry-failed merges recoveries without duplicates", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(22, { empty: [3, 17] }));
    const out = join(d, "out");
    const first = await job(input, out, new FakeModel(), {
      source: failingIds(defaultFileSource(input), new Set(["id-5", "id-12", "id-21"])),
    }).run();
    expect(first.rowsOk).toBe(17);
    expect(await failureIds(out)).toEqual(["id-3", "id-5", "id-12", "id-17", "id-21"]);
    const failure = JSON.parse((await readFile(join(out, "failures.jsonl"), "utf8")).split("\n")[0]!);
    expect(failure).toEqual({ id: "id-3", row: 3, code: "EMPTY_TEXT", message: "text is empty" });

    const model = new FakeModel();
    const retry = await job(input, out, model, { mode: "retry-failed" }).run();
    expect(retry.action).toBe("retried");
    expect(retry.rowsOk).toBe(3);
    expect(model.calls.flat()).toHaveLength(5); // only the failures were reprocessed
    expect(await failureIds(out)).toEqual(["id-3", "id-17"]);
    const ids = await okIds(out);
    const all = [...ids, ...(await failureIds(out))].sort();
    expect(all).toEqual(Array.from({ length: 22 }, (_, i) => `id-${i}`).sort());
    expect(new Set(ids).size).toBe(ids.length);
    const m = await manifest(out);
    expect(m.retries).toHaveLength(1);
    expect(m.retries[0]).toMatchObject({ round: 1, rowsAttempted: 5, complete: true });
    expect(m.totals).toMatchObject({ ok: 20, failed: 2 });

    // Another retry reprocesses only what is still failing; then nothing changes.
    const again = await job(input, out, new FakeModel(), { mode: "retry-failed" }).run();
    expect(again.rowsOk).toBe(0);
    expect(await failureIds(out)).toEqual(["id-3", "id-17"]);
    expect(await okIds(out)).toHaveLength(20);
  });

  it("a retry round that crashes resumes without duplicating recovered rows", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(30));
    const out = join(d, "out");
    const failing = new Set(Array.from({ length: 30 }, (_, i) => `id-${i}`).filter((_, i) => i % 2 === 0));
    await job(input, out, new FakeModel(), {
      source: failingIds(defaultFileSource(input), failing),
      shardSize: 10,
    }).run();
    expect(await failureIds(out)).toHaveLength(15);

    // Retry units hold 10 failed rows each; batch size 4 → 3 calls per unit: die in the second unit.
    const crashing = new FakeModel();
    crashing.failOnCall = 4;
    await expect(job(input, out, crashing, { mode: "retry-failed" }).run()).rejects.toThrow(/worker crashed/);
    const mid = await manifest(out);
    expect(mid.retries[0]).toMatchObject({ complete: false, rowsAttempted: 15 });
    expect(mid.retries[0]!.shards).toHaveLength(1);
    expect(mid.totals.failed).toBe(5);

    const model = new FakeModel();
    const resumed = await job(input, out, model, { mode: "retry-failed" }).run();
    expect(model.calls.flat()).toHaveLength(5);
    expect(resumed.rowsOk).toBe(5);
    const ids = await okIds(out);
    expect(ids).toHaveLength(30);
    expect(new Set(ids).size).toBe(30);
    expect(await failureIds(out)).toEqual([]);
    expect((await manifest(out)).retries).toHaveLength(1);
  });

  it("refuses to mix runs when input, model or config changed, and --new-run starts over", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(12));
    const out = join(d, "out");
    await job(input, out, new FakeModel()).run();
    const expectMismatch = async (p: Promise<unknown>, what: RegExp) => {
      const err = await p.then(
        () => null,
        (e: unknown) => e,
      );
      expect(isSluiceError(err, "MANIFEST_MISMATCH")).toBe(true);
      expect((err as Error).message).toMatch(what);
      expect((err as Error).message).toMatch(/--new-run/);
    };
    await expectMismatch(
      job(input, out, new FakeModel(), { outputConfig: { task: "embedding", pooling: "mean" } }).run(),
      /config \(.*pooling/,
    );
    const other = new FakeModel();
    (other as { identity: { name: string; version: string } }).identity = { name: "fake", version: "v2" };
    await expectMismatch(job(input, out, other).run(), /model fake@v1 → fake@v2/);
    await expectMismatch(job(input, out, new FakeModel(), { batchSize: 8 }).run(), /config \(batching\)/);
    await writeFile(input, jsonlInput(13));
    await expectMismatch(job(input, out, new FakeModel()).run(), /input content/);

    const oldRun = (await manifest(out)).runId;
    const fresh = await job(input, out, new FakeModel(), { mode: "new-run" }).run();
    expect(fresh.rowsOk).toBe(13);
    expect(fresh.runId).not.toBe(oldRun);
    expect(await okIds(out)).toHaveLength(13);
  });

  it("reads CSV with configurable columns and reports undecodable rows as failures", async () => {
    const d = await tempDir();
    const input = join(d, "in.csv");
    await writeFile(
      input,
      '\uFEFFkey,body,other\r\nk1,"hello, world",x\r\nk2,"multi\nline",y\r\n,orphan,z\r\nk4,plain,w\r\n',
    );
    const out = join(d, "out");
    const summary = await new BatchJob({
      source: defaultFileSource(input, { idField: "key", textField: "body" }),
      sink: new PartFileSink({ dir: out, format: "jsonl" }),
      model: new FakeModel(),
      stateDir: out,
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    expect(summary.rowsOk).toBe(3);
    expect(await okIds(out)).toEqual(["k1", "k2", "k4"]);
    const rows = (await readFile(join(out, "part-00000.jsonl"), "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(rows[0].output.embedding[0]).toBe("hello, world".length);
    expect(rows[1].output.embedding[0]).toBe("multi\nline".length);
    expect(await failureIds(out)).toEqual(["#row-2"]);
    expect((await manifest(out)).input).toMatchObject({ format: "csv", rows: 4 });
  });

  it("stops before any work when the CSV header lacks the id or text column", async () => {
    const d = await tempDir();
    const input = join(d, "in.csv");
    await writeFile(input, "a,b\n1,2\n");
    const run = new BatchJob({
      source: defaultFileSource(input),
      sink: new PartFileSink({ dir: join(d, "out"), format: "jsonl" }),
      model: new FakeModel(),
      stateDir: join(d, "out"),
      ...defaultJobOptions,
      outputConfig: {},
    }).run();
    await expect(run).rejects.toThrow(/needs "id" and "text".*--id-field/);
  });

  it("writes Avro container parts that decode to the same rows, byte-identical across runs", async () => {
    const d = await tempDir();
    const input = join(d, "in.jsonl");
    await writeFile(input, jsonlInput(7));
    for (const name of ["a", "b"]) {
      await new BatchJob({
        source: defaultFileSource(input),
        sink: new PartFileSink({ dir: join(d, name), format: "avro" }),
        model: new FakeModel(),
        stateDir: join(d, name),
        ...defaultJobOptions,
        outputConfig: {},
      }).run();
    }
    const a = await readFile(join(d, "a", "part-00000.avro"));
    expect((await readFile(join(d, "b", "part-00000.avro"))).equals(a)).toBe(true);
    const decoded: { id: string; row: number; embedding: number[] }[] = [];
    await new Promise<void>((resolve, reject) => {
      avro
        .createFileDecoder(join(d, "a", "part-00000.avro"))
        .on("data", (r: { id: string; row: number; embedding: number[] }) => decoded.push(r))
        .on("end", () => resolve())
        .on("error", reject);
    });
    expect(decoded.map((r) => r.id)).toEqual(Array.from({ length: 7 }, (_, i) => `id-${i}`));
    expect(decoded[0]!.embedding).toEqual([5, 1, expect.any(Number)]);
  });
});
