import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { BatchJob, type BatchJobOptions } from "../../../src/batch/batch-job.js";
import type { BatchManifest } from "../../../src/batch/batch-manifest.js";
import { PartFileSink } from "../../../src/batch/part-file-sink.js";
import type { ItemOutcome, ModelPort } from "../../../src/model/model-port.js";
import { runCost } from "../../../src/runs/run-cost.js";
import { defaultFileSource, defaultJobOptions } from "../../support/batch-defaults.js";

/** The ONNX seam: 3 tokens and 2 ms of worker CPU per item, as a real runner reports them. */
class CostedModel implements ModelPort {
  readonly identity = { name: "fake", version: "v1" };
  readonly task = "embedding" as const;
  readonly cpuSource = "proc-schedstat" as const;
  countTokens(): number {
    return 3;
  }
  async run(texts: readonly unknown[]) {
    const outcomes: ItemOutcome[] = texts.map(() => ({
      ok: true,
      output: { embedding: [1, 2, 3] },
      tokens: 3,
      truncated: false,
    }));
    const stats = { inferenceMs: 1, realTokens: 3 * texts.length, paddedTokens: 3 * texts.length };
    return { outcomes, stats: { ...stats, cpuMs: 2 * texts.length } };
  }
  async close() {}
}

const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function setup(rows: number): Promise<{ input: string; out: string }> {
  const d = await mkdtemp(join(tmpdir(), "sluice-batch-cost-"));
  dirs.push(d);
  const input = join(d, "in.jsonl");
  await writeFile(
    input,
    Array.from({ length: rows }, (_, i) => JSON.stringify({ id: `id-${i}`, text: `row ${i}` })).join("\n"),
  );
  return { input, out: join(d, "out") };
}

/** A fake process CPU clock: each reading is 100 ms later than the one before. */
function steppingCpu(): () => number {
  let ms = 0;
  return () => (ms += 100);
}

function job(input: string, out: string, extra: Partial<BatchJobOptions> = {}): BatchJob {
  return new BatchJob({
    source: defaultFileSource(input),
    sink: new PartFileSink({ dir: out, format: "jsonl" }),
    model: new CostedModel(),
    stateDir: out,
    ...defaultJobOptions,
    shardSize: 10,
    batchSize: 4,
    outputConfig: { task: "embedding" },
    ...extra,
  });
}

const manifest = async (dir: string) =>
  JSON.parse(await readFile(join(dir, "manifest.json"), "utf8")) as BatchManifest;

describe("a batch run's cost in manifest.json", () => {
  it("records CPU (model and total), wall, items, tokens, per-1k figures and money; a rerun adds nothing", async () => {
    const { input, out } = await setup(25);
    const prices = { cpuCoreHour: 0.036, currency: "USD", tokens: true };
    const summary = await job(input, out, { prices, processCpuMs: steppingCpu() }).run();
    const m = await manifest(out);
    const cost = m.cost!;
    expect(cost).toMatchObject({
      items: 25,
      tokens: 75,
      modelCpuSeconds: 0.05,
      modelCpuSecondsPer1kItems: 2,
      modelCpuSecondsPer1kTokens: 0.666667,
      modelCpuSource: "proc-schedstat",
    });
    // Total CPU: the fake clock's readings after the baseline, one per manifest save with totals.
    expect(cost.totalCpuSeconds).toBeGreaterThan(0);
    expect(cost.totalCpuSecondsPer1kItems).toBeCloseTo((cost.totalCpuSeconds! * 1000) / 25, 5);
    expect(cost.wallSeconds).toBeGreaterThanOrEqual(0);
    expect(cost.money).toEqual({
      currency: "USD",
      cpuCoreHour: 0.036,
      total: Number(((cost.totalCpuSeconds! / 3600) * 0.036).toPrecision(4)),
      per1kItems: Number((((cost.totalCpuSeconds! / 3600) * 0.036 * 1000) / 25).toPrecision(4)),
      per1kTokens: Number((((cost.totalCpuSeconds! / 3600) * 0.036 * 1000) / 75).toPrecision(4)),
    });
    expect(summary.cost).toEqual(cost);
    expect(summary.message).toMatch(/cost: [\d.]+ CPU-s \(model 0\.1\), [\d.]+ CPU-s\/1k items/);
    expect(summary.message).toMatch(/USD/);

    // A rerun of the complete run writes nothing, so it adds nothing (not even its start-up).
    const again = await job(input, out, { prices, processCpuMs: steppingCpu() }).run();
    expect(again.action).toBe("nothing-to-do");
    expect((await manifest(out)).cost).toEqual(cost);
  });

  it("without prices there are no money fields, and cost.tokens: false drops the per-token figures", async () => {
    const { input, out } = await setup(5);
    await job(input, out, { prices: { tokens: false }, processCpuMs: steppingCpu() }).run();
    const cost = (await manifest(out)).cost!;
    expect(cost.money).toBeUndefined();
    expect(cost.modelCpuSecondsPer1kTokens).toBeUndefined();
    expect(cost.items).toBe(5);
  });

  it("a resumed run adds the invocations' counts (items, tokens, CPU, wall)", async () => {
    const { input, out } = await setup(30);
    const first = job(input, out, { processCpuMs: steppingCpu() });
    // Stop after the first shard, then resume.
    const original = first.run.bind(first);
    setImmediate(() => first.stop());
    const interrupted = await original();
    expect(interrupted.action).toBe("interrupted");
    const part = (await manifest(out)).cost!;
    expect(part.items).toBeLessThan(30);
    await job(input, out, { processCpuMs: steppingCpu() }).run();
    const whole = (await manifest(out)).cost!;
    expect(whole.items).toBe(30);
    expect(whole.tokens).toBe(90);
    expect(whole.modelCpuSeconds).toBeCloseTo(0.06, 9);
    expect(whole.totalCpuSeconds).toBeGreaterThan(part.totalCpuSeconds!);
  });
});

describe("runCost", () => {
  it("prices the total CPU when known, else the model CPU, and gives null per-1k figures for zero items", () => {
    const priced = runCost(
      { items: 0, tokens: 0, modelCpuMs: 3_600_000 },
      { cpuCoreHour: 0.05, currency: "EUR", tokens: true },
    );
    expect(priced.money).toEqual({
      currency: "EUR",
      cpuCoreHour: 0.05,
      total: 0.05,
      per1kItems: null,
      per1kTokens: null,
    });
    expect(priced.modelCpuSecondsPer1kItems).toBeNull();
    // A price without a currency gives no money figure (nothing to name it in).
    expect(
      runCost({ items: 1, tokens: 1, modelCpuMs: 1 }, { cpuCoreHour: 1, tokens: true }).money,
    ).toBeUndefined();
  });
});
