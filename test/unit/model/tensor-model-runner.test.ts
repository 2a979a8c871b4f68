import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelSettings } from "../../../src/config/model-settings.js";
import type { NamedTensor, TensorInputs } from "../../../src/contracts/tensor.js";
import type { ItemOutcome } from "../../../src/model/model-port.js";
import { TensorModelRunner } from "../../../src/model/tensor-model-runner.js";
import {
  createTinyTensorModels,
  IRIS_LABELS,
  lrReference,
  type TinyTensorModels,
  TREE_LABELS,
  treeReference,
} from "../../support/tiny-tensor-onnx.js";

let dir: string;
let models: TinyTensorModels;
const runners: TensorModelRunner[] = [];

async function open(path: string, extra: Record<string, unknown> = {}): Promise<TensorModelRunner> {
  const runner = await TensorModelRunner.create(
    modelSettings({ modelPath: path, tokenizerPath: "", task: "tensor", name: "tiny", workers: 1, ...extra }),
  );
  runners.push(runner);
  return runner;
}

function fp32(name: string, rows: number[][]): NamedTensor {
  return { name, datatype: "FP32", shape: [rows.length, rows[0]!.length], data: rows.flat() };
}

function request(...inputs: NamedTensor[]): TensorInputs {
  return { inputs, outputs: null };
}

function tensors(outcome: ItemOutcome | undefined): Record<string, NamedTensor> {
  if (outcome === undefined || !outcome.ok || !("tensors" in outcome.output))
    throw new Error(`expected tensor outputs, got ${JSON.stringify(outcome)}`);
  return Object.fromEntries((outcome.output.tensors ?? []).map((t) => [t.name, t]));
}

const ROWS = [
  [1, 2, 3, 4],
  [5.1, 3.5, 1.4, 0.2],
  [6.2, 2.9, 4.3, 1.3],
  [6.3, 3.3, 6, 2.5],
  [-3, 0.25, 10, -8],
];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tensor-"));
  models = await createTinyTensorModels(dir);
});

afterAll(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await rm(dir, { recursive: true, force: true });
});

describe("TensorModelRunner", () => {
  it("reads the signature from the graph: names, V2 datatypes, a dynamic batch dimension", async () => {
    const lr = await open(models.lr);
    expect(lr.description.signature.inputs).toEqual([
      { name: "predict", datatype: "FP32", elementType: "float32", dims: [null, 4] },
    ]);
    expect(lr.description.signature.outputs.map((o) => [o.name, o.datatype])).toEqual([
      ["probability", "FP32"],
    ]);
    const tree = await open(models.treeStrings);
    expect(tree.description.signature.outputs.map((o) => [o.name, o.datatype])).toEqual([
      ["label", "BYTES"],
      ["probabilities", "FP32"],
    ]);
  });

  it("runs the logistic regression on the iris request and matches sigmoid(x·w+b) by hand", async () => {
    const lr = await open(models.lr);
    const { outcomes } = await lr.run([request(fp32("predict", [ROWS[0]!]))]);
    const p = tensors(outcomes[0]).probability!;
    expect(p.shape).toEqual([1, 1]);
    expect(p.datatype).toBe("FP32");
    expect(p.data[0] as number).toBeCloseTo(lrReference(ROWS[0]!), 6);
  });

  it("stacks requests of several rows into one call and splits the outputs back per request", async () => {
    const lr = await open(models.lr);
    const requests = [request(fp32("predict", ROWS.slice(0, 2))), request(fp32("predict", ROWS.slice(2)))];
    const { outcomes, stats } = await lr.run(requests);
    expect(stats.realTokens).toBe(5);
    const first = tensors(outcomes[0]).probability!;
    const second = tensors(outcomes[1]).probability!;
    expect(first.shape).toEqual([2, 1]);
    expect(second.shape).toEqual([3, 1]);
    const all = [...(first.data as number[]), ...(second.data as number[])];
    for (const [i, v] of all.entries()) expect(v).toBeCloseTo(lrReference(ROWS[i]!), 6);
  });

  it("stacking changes no output bit: stacked equals one request per call (LR and tree)", async () => {
    for (const path of [models.lr, models.treeStrings]) {
      const stacked = await open(path);
      const alone = await open(path, { itemIsolation: "always" });
      const reqs = ROWS.map((r) => request(fp32("predict", [r])));
      const a = await stacked.run(reqs);
      const b = await alone.run(reqs);
      expect(a.outcomes).toEqual(b.outcomes);
    }
  });

  it("tree classifier: string labels and probabilities equal the tree walked by hand", async () => {
    const tree = await open(models.treeStrings);
    const { outcomes } = await tree.run([request(fp32("predict", ROWS))]);
    const out = tensors(outcomes[0]);
    expect(out.label!.datatype).toBe("BYTES");
    expect(out.label!.data).toEqual(ROWS.map((r) => IRIS_LABELS[treeReference(r).label]));
    const probs = out.probabilities!.data as number[];
    for (const [i, r] of ROWS.entries()) {
      for (const [c, p] of treeReference(r).probabilities.entries())
        expect(probs[i * 3 + c]).toBeCloseTo(p, 6);
    }
  });

  it("tree classifier with int64 labels returns INT64 label numbers", async () => {
    const tree = await open(models.treeInts);
    const { outcomes } = await tree.run([request(fp32("predict", ROWS))]);
    const label = tensors(outcomes[0]).label!;
    expect(label.datatype).toBe("INT64");
    expect(label.data).toEqual(ROWS.map((r) => treeReference(r).label));
  });

  it.each(["string", "int64"] as const)(
    "a ZipMap output (%s labels) is unwrapped: FP32 [rows, 3] under its name, labels in its parameters, stacked or not",
    async (kind) => {
      const labels = TREE_LABELS[kind];
      const path = kind === "string" ? models.treeZipMap : models.treeZipMapInts;
      const tree = await open(path);
      const { signature } = tree.description;
      expect(signature.skippedOutputs).toEqual([]);
      expect(signature.outputs.find((o) => o.name === "output_probability")).toEqual({
        name: "output_probability",
        datatype: "FP32",
        elementType: "float32",
        dims: [null, 3],
        labels,
      });
      const { outcomes } = await tree.run([
        request(fp32("predict", ROWS.slice(0, 2))),
        request(fp32("predict", ROWS.slice(2))),
      ]);
      const rows = [ROWS.slice(0, 2), ROWS.slice(2)];
      outcomes.forEach((outcome, i) => {
        const out = tensors(outcome);
        expect(Object.keys(out)).toEqual(["output_label", "output_probability"]);
        expect(out.output_label!.data).toEqual(rows[i]!.map((r) => labels[treeReference(r).label]));
        expect(out.output_probability).toMatchObject({
          datatype: "FP32",
          shape: [rows[i]!.length, 3],
          parameters: { labels: JSON.stringify(labels) },
        });
        expect(out.output_probability!.data).toEqual(
          rows[i]!.flatMap((r) => treeReference(r).probabilities.map(Math.fround)),
        );
      });
      // The version is the model file's (what backfill expects), not the rewritten graph's.
      expect(tree.description.modelSha256).toBe(
        createHash("sha256")
          .update(await readFile(path))
          .digest("hex"),
      );
    },
  );

  it("two named inputs (FP32 and INT64) give FP32 and BOOL outputs; requested outputs only", async () => {
    const two = await open(models.twoInputs);
    const age: NamedTensor = { name: "age", datatype: "FP32", shape: [2, 1], data: [3, 4.5] };
    const visits: NamedTensor = { name: "visits", datatype: "INT64", shape: [2, 1], data: [1, 2] };
    const { outcomes } = await two.run([
      { inputs: [visits, age], outputs: null },
      { inputs: [age, visits], outputs: ["high"] },
    ]);
    const all = tensors(outcomes[0]);
    expect(all.score!.data).toEqual([7, 11]);
    expect(all.high!.data).toEqual([false, true]);
    expect(Object.keys(tensors(outcomes[1]))).toEqual(["high"]);
  });

  it("each bad request is its own named validation failure; its neighbours still run", async () => {
    const lr = await open(models.lr, { maxRequestRows: 4 });
    const good = request(fp32("predict", [ROWS[0]!]));
    const cases: [unknown, string, Record<string, string>][] = [
      [request(fp32("other", [ROWS[0]!])), "TENSOR_INPUT_UNKNOWN", { input: "other" }],
      [
        { inputs: [], outputs: null },
        "TENSOR_INPUT_MISSING",
        { input: "predict", "expected-shape": "[-1,4]" },
      ],
      [
        request({ name: "predict", datatype: "FP64", shape: [1, 4], data: [1, 2, 3, 4] }),
        "TENSOR_DATATYPE_MISMATCH",
        { "expected-datatype": "FP32", "actual-datatype": "FP64" },
      ],
      [
        request({ name: "predict", datatype: "FP32", shape: [1, 3], data: [1, 2, 3] }),
        "TENSOR_SHAPE_MISMATCH",
        { "expected-shape": "[-1,4]", "actual-shape": "[1,3]" },
      ],
      [
        request({ name: "predict", datatype: "FP32", shape: [1, 4], data: [1, 1e39, 3, 4] }),
        "TENSOR_NON_FINITE",
        { "element-index": "1" },
      ],
      [request(fp32("predict", ROWS)), "TENSOR_TOO_MANY_ROWS", { "max-rows": "4", "actual-shape": "[5,4]" }],
      [
        { inputs: [fp32("predict", [ROWS[0]!])], outputs: ["nope"] },
        "TENSOR_OUTPUT_UNKNOWN",
        { output: "nope" },
      ],
      ["a text", "TENSOR_REQUEST_REQUIRED", {}],
    ];
    const { outcomes } = await lr.run([good, ...cases.map((c) => c[0]), good]);
    expect(tensors(outcomes[0]).probability!.data[0]).toBeCloseTo(lrReference(ROWS[0]!), 6);
    expect(tensors(outcomes.at(-1)).probability!.data[0]).toBeCloseTo(lrReference(ROWS[0]!), 6);
    cases.forEach(([, code, context], i) => {
      const o = outcomes[i + 1]!;
      expect(o.ok).toBe(false);
      if (o.ok) return;
      expect(o.code).toBe(code);
      expect("stage" in o && o.stage).toBe("validate");
      if ("context" in o) expect(o.context).toMatchObject(context);
    });
  });
});
