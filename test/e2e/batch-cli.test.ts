import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BatchSeamSpec } from "../support/batch-seams.js";
import { startCli } from "../support/cli-process.js";
import { createTinyModel, TINY_VOCAB, tinyModelConfigYaml } from "../support/tiny-onnx.js";

/** `sluice batch` as a child process over the tiny ONNX model (real onnxruntime, fast and exact). */
let dir: string;
let configPath: string;
let input: string;
const N = 60;
const WORDS = TINY_VOCAB.slice(4);

/** `sluice -c <tiny model config> …args`, started (for signals) or run to completion; `seams` for test seams. */
const batchCli = (args: string[], env: Record<string, string> = {}, seams?: BatchSeamSpec) =>
  startCli(["-c", configPath, ...args], env, seams);
const run = (args: string[], env: Record<string, string> = {}, seams?: BatchSeamSpec) =>
  batchCli(args, env, seams).done;

async function partFiles(out: string): Promise<string[]> {
  return (await readdir(out)).filter((n) => /part-\d+\.jsonl$/.test(n)).sort();
}
async function okIds(out: string): Promise<string[]> {
  const ids: string[] = [];
  for (const name of await partFiles(out)) {
    const text = await readFile(join(out, name), "utf8");
    for (const line of text.split("\n")) if (line) ids.push((JSON.parse(line) as { id: string }).id);
  }
  return ids;
}
async function failureIds(out: string): Promise<string[]> {
  const text = await readFile(join(out, "failures.jsonl"), "utf8");
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);
}
async function manifest(out: string) {
  return JSON.parse(await readFile(join(out, "manifest.json"), "utf8"));
}
const allIds = Array.from({ length: N }, (_, i) => `r${i}`);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-batch-e2e-"));
  const model = await createTinyModel(join(dir, "model"), { task: "embedding" });
  configPath = join(dir, "sluice.yaml");
  await writeFile(configPath, tinyModelConfigYaml(model));
  input = join(dir, "in.jsonl");
  const lines = allIds.map((id, i) => {
    const text =
      i === 7 || i === 44
        ? "  "
        : Array.from({ length: 1 + (i % 9) }, (_, j) => WORDS[(i + j) % WORDS.length]).join(" ");
    return JSON.stringify({ id, text });
  });
  await writeFile(input, `${lines.join("\n")}\n`);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("sluice batch (CLI)", () => {
  it("survives SIGKILL mid-run: rerunning the same command completes with every id exactly once", async () => {
    const out = join(dir, "killed");
    const args = ["batch", "--input", input, "--output", out, "--shard-size", "10", "--batch-size", "4"];
    const { child } = batchCli(args, {}, { shardDelayMs: 400 });
    // Wait until at least two shards are checkpointed, then kill without any chance to clean up.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const m = await manifest(out).catch(() => null);
      if (m && m.shards.length >= 2) break;
      if (Date.now() > deadline) throw new Error("batch run never checkpointed two shards");
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill("SIGKILL");
    await new Promise((r) => child.on("close", r));
    const mid = await manifest(out);
    expect(mid.status).toBe("running");
    expect(mid.shards.length).toBeLessThan(6);

    const rerun = await run(args);
    expect(rerun.code, rerun.out).toBe(0);
    expect(rerun.out).toMatch(/skipped \d+/);
    const ids = await okIds(out);
    const failed = await failureIds(out);
    expect(failed).toEqual(["r7", "r44"]);
    expect([...ids, ...failed].sort()).toEqual([...allIds].sort());
    expect(new Set(ids).size).toBe(ids.length);
    const m = await manifest(out);
    expect(m.status).toBe("complete");
    expect(m.shards.map((s: { key: string }) => s.key)).toEqual(
      [0, 1, 2, 3, 4, 5].map((i) => `part-0000${i}`),
    );
    expect(m.totals).toMatchObject({ rows: N, ok: N - 2, failed: 2, shardsComplete: 6 });
    expect((await readdir(out)).filter((n) => n.endsWith(".tmp"))).toEqual([]);

    // Byte-identical to an uninterrupted run (determinism; no timestamps in part files).
    const clean = join(dir, "clean");
    expect(
      (await run(["batch", "--input", input, "--output", clean, "--shard-size", "10", "--batch-size", "4"]))
        .code,
    ).toBe(0);
    for (const name of await partFiles(out)) {
      expect(await readFile(join(clean, name))).toEqual(await readFile(join(out, name)));
    }
  });

  it("SIGINT stops after the shard in progress with exit code 130; the same command resumes", async () => {
    const out = join(dir, "interrupted");
    const args = ["batch", "--input", input, "--output", out, "--shard-size", "10"];
    const { child } = batchCli(args, {}, { shardDelayMs: 300 });
    let log = "";
    child.stderr.on("data", (d: Buffer) => (log += d.toString()));
    const closed = new Promise<number | null>((resolve) => child.on("close", resolve));
    for (const deadline = Date.now() + 30_000; ; ) {
      const m = await manifest(out).catch(() => null);
      if (m && m.shards.length >= 1) break;
      if (Date.now() > deadline) throw new Error("no shard checkpointed");
      await new Promise((r) => setTimeout(r, 25));
    }
    child.kill("SIGINT");
    expect(await closed).toBe(130);
    expect(log).toMatch(/stopping after the shard in progress/);
    expect(log).toMatch(/stopped on request after \d shard\(s\).*run the same command to resume/);
    expect((await readdir(out)).filter((n) => n.endsWith(".tmp") || n === "batch.lock")).toEqual([]);
    const mid = await manifest(out);
    expect(mid.status).toBe("running");
    expect(mid.shards.length).toBeLessThan(6);

    const rest = await run(args);
    expect(rest.code, rest.out).toBe(0);
    const ids = await okIds(out);
    expect([...ids, ...(await failureIds(out))].sort()).toEqual([...allIds].sort());
  });

  it("a second identical run writes nothing; --retry-failed after injected failures leaves each id exactly once", async () => {
    const out = join(dir, "retry");
    const args = ["batch", "--input", input, "--output", out, "--shard-size", "25"];
    const first = await run(args, {}, { failIds: ["r3", "r30", "r59"] });
    expect(first.code, first.out).toBe(0);
    expect(await failureIds(out)).toEqual(["r3", "r7", "r30", "r44", "r59"]);
    // The run's cost: every row the model was asked about, CPU of the process and of the model.
    const cost = (await manifest(out)).cost;
    // The three injected failures fail at the source (the failIds seam), before the model: not its items.
    expect(cost).toMatchObject({ items: N - 3, modelCpuSource: "proc-schedstat" });
    expect(cost.tokens).toBeGreaterThan(N);
    expect(cost.totalCpuSeconds).toBeGreaterThan(cost.modelCpuSeconds);
    expect(cost.money).toBeUndefined(); // no prices configured
    expect(first.out).toMatch(/run cost: [\d.]+ CPU-s \(model [\d.]+\)/);

    const before = await Promise.all(
      (await partFiles(out)).map(async (n) => (await stat(join(out, n))).mtimeMs),
    );
    const second = await run(args);
    expect(second.code).toBe(0);
    expect(second.out).toMatch(/already complete.*nothing to do/);
    const after = await Promise.all(
      (await partFiles(out)).map(async (n) => (await stat(join(out, n))).mtimeMs),
    );
    expect(after).toEqual(before);
    expect((await manifest(out)).cost).toEqual(cost); // a rerun that writes nothing adds nothing

    const retry = await run([...args, "--retry-failed"]);
    expect(retry.code, retry.out).toBe(0);
    expect(await failureIds(out)).toEqual(["r7", "r44"]);
    expect(await partFiles(out)).toContain("retry-01-part-00000.jsonl");
    const ids = await okIds(out);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids, "r7", "r44"].sort()).toEqual([...allIds].sort());
    const m = await manifest(out);
    expect(m.retries[0]).toMatchObject({ round: 1, rowsAttempted: 5, complete: true });
    expect(m.cost.items).toBe(N - 3 + 5); // the retry round's rows were asked again
    for (const s of [...m.shards, ...m.retries[0].shards]) {
      const bytes = await readFile(join(out, s.output));
      expect(createHash("sha256").update(bytes).digest("hex")).toBe(s.sha256);
    }
  });

  it("refuses to mix a changed config into an existing run and tells how to start a new one", async () => {
    const out = join(dir, "mismatch");
    expect((await run(["batch", "-i", input, "-o", out])).code).toBe(0);
    const changed = await run(["batch", "-i", input, "-o", out], { SLUICE_MODEL__MAX_SEQUENCE_TOKENS: "8" });
    expect(changed.code).toBe(1);
    expect(changed.out).toMatch(/MANIFEST_MISMATCH: .*maxSequenceTokens.*--new-run/);
    const fresh = await run(["batch", "-i", input, "-o", out, "--new-run"], {
      SLUICE_MODEL__MAX_SEQUENCE_TOKENS: "8",
    });
    expect(fresh.code, fresh.out).toBe(0);
    expect((await manifest(out)).config.maxSequenceTokens).toBe(8);
  });

  it("sluice plan --measure takes the per-worker rate from a local run of the configured model", async () => {
    const plan = await run([
      "plan",
      "--items",
      "1000000",
      "--window",
      "1h",
      "--measure",
      "--measure-seconds",
      "0.5",
      "--json",
    ]);
    expect(plan.code, plan.out).toBe(0);
    const json = JSON.parse(plan.out.slice(plan.out.indexOf("{")));
    expect(json.perWorkerItemsPerSec).toBeGreaterThan(0);
    expect(json.workers).toBe(Math.ceil(1_000_000 / 3600 / json.perWorkerItemsPerSec));
  });

  it("sluice plan prints the issue's example", async () => {
    const plan = await run([
      "plan",
      "--items",
      "5000000",
      "--window",
      "2h",
      "--per-worker-qps",
      "60",
      "--headroom",
      "0.2",
    ]);
    expect(plan.code).toBe(0);
    expect(plan.out).toMatch(/694\.44 items\/s/);
    expect(plan.out).toMatch(/workers \(minimum\):\s+12/);
    expect(plan.out).toMatch(/14–16/);
  });
});
