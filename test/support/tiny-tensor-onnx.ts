import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ModelProto, valueInfo } from "./tiny-onnx.js";

/**
 * Tiny tabular ONNX models for `model.task: tensor`, built in the tests (no hub downloads) with the
 * protobuf subset of tiny-onnx.ts. Their outputs are computed by hand below:
 * - logistic regression: probability = sigmoid(x · LR_W + LR_B), input "predict" FP32 [batch, 4];
 * - tree classifier (ai.onnx.ml TreeEnsembleClassifier, one tree, the iris split): "label" [batch]
 *   (string or int64 labels) and "probabilities" FP32 [batch, 3]; or, as skl2onnx exports a classifier
 *   by default, "output_label" and "output_probability", a ZipMap of the probabilities (a sequence of
 *   maps {label → probability});
 * - two inputs: "age" FP32 [batch, 1] and "visits" INT64 [batch, 1] → "score" = 2·age + visits FP32
 *   [batch, 1] and "high" = score > 10 BOOL [batch, 1].
 */
const FLOAT = 1;
const INT64 = 7;
const STRING = 8;
const BOOL = 9;
const ATTR = { FLOAT: 1, INT: 2, STRING: 3, FLOATS: 6, INTS: 7, STRINGS: 8 } as const;

export const LR_W = [0.5, -0.25, 0.75, -1];
export const LR_B = -0.5;
export const IRIS_LABELS = ["setosa", "versicolor", "virginica"] as const;
/** The tree classifier's class labels, by `TreeOptions.labels`, in column order. */
export const TREE_LABELS = { string: [...IRIS_LABELS], int64: [0, 1, 2] };
/** The MLServer / Seldon sklearn iris example request. */
export const IRIS_REQUEST = {
  inputs: [{ name: "predict", shape: [1, 4], datatype: "FP32", data: [[1, 2, 3, 4]] }],
};

export function lrReference(x: readonly number[]): number {
  const z = x.reduce((s, v, i) => s + Math.fround(v) * LR_W[i]!, LR_B);
  return 1 / (1 + Math.exp(-z));
}

/** The tree by hand: petal length (x[2]) ≤ 2.5 → setosa; else petal width (x[3]) ≤ 1.75 → mostly versicolor. */
export function treeReference(x: readonly number[]): { label: number; probabilities: number[] } {
  if (x[2]! <= 2.5) return { label: 0, probabilities: [1, 0, 0] };
  if (x[3]! <= 1.75) return { label: 1, probabilities: [0, 0.9, 0.1] };
  return { label: 2, probabilities: [0, 0.2, 0.8] };
}

function floatTensor(name: string, dims: number[], values: number[]) {
  return { name, dims, dataType: FLOAT, rawData: new Uint8Array(new Float32Array(values).buffer) };
}

function encode(name: string, nodes: object[], initializer: object[], input: object[], output: object[]) {
  return ModelProto.encode(
    ModelProto.fromObject({
      irVersion: 8,
      producerName: "sluice-tiny-tensor-onnx",
      opsetImport: [
        { domain: "", version: 13 },
        { domain: "ai.onnx.ml", version: 3 },
      ],
      graph: { name, node: nodes, initializer, input, output },
    }),
  ).finish();
}

export function buildLogisticRegressionBytes(): Uint8Array {
  return encode(
    "tiny_lr",
    [
      { opType: "MatMul", input: ["predict", "W"], output: ["z0"], name: "mm" },
      { opType: "Add", input: ["z0", "B"], output: ["z"], name: "add" },
      { opType: "Sigmoid", input: ["z"], output: ["probability"], name: "sig" },
    ],
    [floatTensor("W", [4, 1], LR_W), floatTensor("B", [1], [LR_B])],
    [valueInfo("predict", FLOAT, ["batch", 4])],
    [valueInfo("probability", FLOAT, ["batch", 1])],
  );
}

/** Width of the busy model's input and of each of its layers. */
export const BUSY_WIDTH = 256;

/**
 * A model that only burns CPU, for tests of CPU budgets and of the online tail beside a backfill:
 * "x" FP32 [batch, width] through `layers` × (MatMul with a width² weight, Tanh) to "y" FP32
 * [batch, width]; `layers` × width² multiply-adds per row.
 */
export function buildBusyMatMulBytes(layers: number, width = BUSY_WIDTH): Uint8Array {
  const nodes: object[] = [];
  let input = "x";
  for (let i = 0; i < layers; i++) {
    const out = i === layers - 1 ? "y" : `h${i}`;
    nodes.push({ opType: "MatMul", input: [input, "W"], output: [`m${i}`], name: `mm${i}` });
    nodes.push({ opType: "Tanh", input: [`m${i}`], output: [out], name: `tanh${i}` });
    input = out;
  }
  const w = Array.from({ length: width * width }, (_, i) => ((i * 7919) % 13) / (10 * width) - 0.05);
  return encode(
    "busy_matmul",
    nodes,
    [floatTensor("W", [width, width], w)],
    [valueInfo("x", FLOAT, ["batch", width])],
    [valueInfo("y", FLOAT, ["batch", width])],
  );
}

export interface TreeOptions {
  labels: "string" | "int64";
  /**
   * skl2onnx's default layout: TreeEnsembleClassifier → output_label + probabilities → ZipMap →
   * output_probability; the graph outputs are output_label and output_probability (no tensor of
   * probabilities).
   */
  zipMap?: boolean;
}

export function buildTreeClassifierBytes(options: TreeOptions): Uint8Array {
  const bytes = (s: string) => new TextEncoder().encode(s);
  const labelAttr =
    options.labels === "string"
      ? { name: "classlabels_strings", type: ATTR.STRINGS, strings: IRIS_LABELS.map(bytes) }
      : { name: "classlabels_int64s", type: ATTR.INTS, ints: TREE_LABELS.int64 };
  const tree = {
    opType: "TreeEnsembleClassifier",
    domain: "ai.onnx.ml",
    name: "tree",
    input: ["predict"],
    output: [options.zipMap === true ? "output_label" : "label", "probabilities"],
    attribute: [
      { name: "nodes_treeids", type: ATTR.INTS, ints: [0, 0, 0, 0, 0] },
      { name: "nodes_nodeids", type: ATTR.INTS, ints: [0, 1, 2, 3, 4] },
      { name: "nodes_featureids", type: ATTR.INTS, ints: [2, 0, 3, 0, 0] },
      {
        name: "nodes_modes",
        type: ATTR.STRINGS,
        strings: ["BRANCH_LEQ", "LEAF", "BRANCH_LEQ", "LEAF", "LEAF"].map(bytes),
      },
      { name: "nodes_values", type: ATTR.FLOATS, floats: [2.5, 0, 1.75, 0, 0] },
      { name: "nodes_truenodeids", type: ATTR.INTS, ints: [1, 0, 3, 0, 0] },
      { name: "nodes_falsenodeids", type: ATTR.INTS, ints: [2, 0, 4, 0, 0] },
      { name: "class_treeids", type: ATTR.INTS, ints: [0, 0, 0, 0, 0] },
      { name: "class_nodeids", type: ATTR.INTS, ints: [1, 3, 3, 4, 4] },
      { name: "class_ids", type: ATTR.INTS, ints: [0, 1, 2, 1, 2] },
      { name: "class_weights", type: ATTR.FLOATS, floats: [1, 0.9, 0.1, 0.2, 0.8] },
      { name: "post_transform", type: ATTR.STRING, s: bytes("NONE") },
      labelAttr,
    ],
  };
  const labelType = options.labels === "string" ? STRING : INT64;
  if (options.zipMap !== true) {
    const outputs = [
      valueInfo("label", labelType, ["batch"]),
      valueInfo("probabilities", FLOAT, ["batch", 3]),
    ];
    return encode("tiny_tree", [tree], [], [valueInfo("predict", FLOAT, ["batch", 4])], outputs);
  }
  const zipMap = {
    opType: "ZipMap",
    domain: "ai.onnx.ml",
    name: "zipmap",
    input: ["probabilities"],
    output: ["output_probability"],
    attribute: [labelAttr],
  };
  const outputs = [
    valueInfo("output_label", labelType, ["batch"]),
    {
      name: "output_probability",
      type: {
        sequenceType: {
          elemType: { mapType: { keyType: labelType, valueType: { tensorType: { elemType: FLOAT } } } },
        },
      },
    },
  ];
  return encode("tiny_tree", [tree, zipMap], [], [valueInfo("predict", FLOAT, ["batch", 4])], outputs);
}

export function buildTwoInputBytes(): Uint8Array {
  return encode(
    "tiny_two_inputs",
    [
      {
        opType: "Cast",
        input: ["visits"],
        output: ["vf"],
        name: "cast",
        attribute: [{ name: "to", i: FLOAT, type: ATTR.INT }],
      },
      { opType: "Mul", input: ["age", "two"], output: ["a2"], name: "mul" },
      { opType: "Add", input: ["a2", "vf"], output: ["score"], name: "add" },
      { opType: "Greater", input: ["score", "ten"], output: ["high"], name: "gt" },
    ],
    [floatTensor("two", [1], [2]), floatTensor("ten", [1], [10])],
    [valueInfo("age", FLOAT, ["batch", 1]), valueInfo("visits", INT64, ["batch", 1])],
    [valueInfo("score", FLOAT, ["batch", 1]), valueInfo("high", BOOL, ["batch", 1])],
  );
}

export interface TinyTensorModels {
  lr: string;
  treeStrings: string;
  treeInts: string;
  treeZipMap: string;
  treeZipMapInts: string;
  twoInputs: string;
}

/** Writes every tiny tensor model under `dir`; returns their paths. */
export async function createTinyTensorModels(dir: string): Promise<TinyTensorModels> {
  await mkdir(dir, { recursive: true });
  const files: [keyof TinyTensorModels, Uint8Array][] = [
    ["lr", buildLogisticRegressionBytes()],
    ["treeStrings", buildTreeClassifierBytes({ labels: "string" })],
    ["treeInts", buildTreeClassifierBytes({ labels: "int64" })],
    ["treeZipMap", buildTreeClassifierBytes({ labels: "string", zipMap: true })],
    ["treeZipMapInts", buildTreeClassifierBytes({ labels: "int64", zipMap: true })],
    ["twoInputs", buildTwoInputBytes()],
  ];
  const out = {} as TinyTensorModels;
  for (const [key, bytes] of files) {
    out[key] = join(dir, `tiny-${key}.onnx`);
    await writeFile(out[key], bytes);
  }
  return out;
}
