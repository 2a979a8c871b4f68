import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { InferenceResult } from "../../src/contracts/inference.js";
import { runCli } from "../support/cli-process.js";
import {
  createTinyTensorModels,
  IRIS_LABELS,
  type TinyTensorModels,
  treeReference,
} from "../support/tiny-tensor-onnx.js";

// `sluice batch` with model.task tensor: feature rows from CSV (`--features`) and V2 requests from
// JSONL through the same engine, results and failures and the manifest as for text.
let dir: string;
let models: TinyTensorModels;
const ROWS = [
  [1, 2, 3, 4],
  [5.1, 3.5, 1.4, 0.2],
  [6.2, 2.9, 4.3, 1.3],
  [6.3, 3.3, 6, 2.5],
];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tensor-batch-"));
  models = await createTinyTensorModels(join(dir, "models"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const env = () => ({
  SLUICE_MODEL__TASK: "tensor",
  SLUICE_MODEL__PATH: models.treeStrings,
  SLUICE_MODEL__NAME: "tree",
  SLUICE_MODEL__WORKERS: "1",
});

async function results(out: string): Promise<Map<string, InferenceResult>> {
  const byId = new Map<string, InferenceResult>();
  for (const name of (await readdir(out)).filter((n) => /part-\d+\.jsonl$/.test(n))) {
    for (const line of (await readFile(join(out, name), "utf8")).split("\n").filter(Boolean)) {
      const r = JSON.parse(line) as InferenceResult;
      byId.set(r.id, r);
    }
  }
  return byId;
}

function expectTree(r: InferenceResult | undefined, row: number[]) {
  const out = Object.fromEntries(
    ((r?.output as { tensors?: { name: string; data: unknown[] }[] } | undefined)?.tensors ?? []).map((t) => [
      t.name,
      t.data,
    ]),
  );
  expect(out.label).toEqual([IRIS_LABELS[treeReference(row).label]]);
  (out.probabilities as number[]).forEach((p, c) => {
    expect(p).toBeCloseTo(treeReference(row).probabilities[c]!, 6);
  });
}

describe("sluice batch with model.task tensor", () => {
  it("CSV feature rows (--features) and a bad row as a failure; the manifest records the features", async () => {
    const input = join(dir, "iris.csv");
    const lines = ["id,sl,sw,pl,pw", ...ROWS.map((r, i) => `r${i},${r.join(",")}`), "bad,1,two,3,4"];
    await writeFile(input, `${lines.join("\n")}\n`);
    const out = join(dir, "out-csv");
    const res = await runCli(
      ["batch", "--input", input, "--output", out, "--features", "sl,sw,pl,pw", "--feature-input", "predict"],
      env(),
    );
    expect(res.code, res.stderr).toBe(0);
    const byId = await results(out);
    ROWS.forEach((r, i) => {
      expectTree(byId.get(`r${i}`), r);
    });
    const failures = (await readFile(join(out, "failures.jsonl"), "utf8")).split("\n").filter(Boolean);
    expect(failures.map((l) => JSON.parse(l).id)).toEqual(["bad"]);
    const manifest = JSON.parse(await readFile(join(out, "manifest.json"), "utf8"));
    expect(JSON.stringify(manifest)).toContain("predict=sl,sw,pl,pw");
  }, 120_000);

  it("JSONL with one V2 request per line", async () => {
    const input = join(dir, "v2.jsonl");
    const lines = ROWS.map((r, i) =>
      JSON.stringify({
        id: `v${i}`,
        inputs: [{ name: "predict", shape: [1, 4], datatype: "FP32", data: [r] }],
      }),
    );
    await writeFile(input, `${lines.join("\n")}\n`);
    const out = join(dir, "out-v2");
    const res = await runCli(["batch", "--input", input, "--output", out], env());
    expect(res.code, res.stderr).toBe(0);
    const byId = await results(out);
    ROWS.forEach((r, i) => {
      expectTree(byId.get(`v${i}`), r);
    });
  }, 120_000);
});
