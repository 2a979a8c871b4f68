import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import {
  concatBytes,
  encodeVarint,
  lengthDelimited,
  readFields,
  readVarints,
  toInt64,
} from "../../../src/model/protobuf-wire.js";
import { unwrapZipMaps } from "../../../src/model/zipmap-unwrap.js";
import { buildTinyModelBytes, ModelProto } from "../../support/tiny-onnx.js";
import {
  buildLogisticRegressionBytes,
  buildTreeClassifierBytes,
  buildTwoInputBytes,
  TREE_LABELS,
  treeReference,
} from "../../support/tiny-tensor-onnx.js";

// The ZipMap rewrite (src/model/zipmap-unwrap.ts) on skl2onnx's default classifier layout:
// TreeEnsembleClassifier → output_label + probabilities → ZipMap → output_probability.
const ROWS = [
  [1, 2, 3, 4],
  [5.1, 3.5, 1.4, 0.2],
  [6.2, 2.9, 4.3, 1.3],
];

type Decoded = {
  opsetImport: { domain?: string }[];
  graph: { node: Record<string, unknown>[]; output: { name: string; type: unknown }[] };
  [key: string]: unknown;
};
const decode = (bytes: Uint8Array) =>
  ModelProto.toObject(ModelProto.decode(bytes), { longs: Number, bytes: String }) as Decoded;
const encode = (model: Decoded) => ModelProto.encode(ModelProto.fromObject(model)).finish();

async function runTree(bytes: Uint8Array, rows: number[][]) {
  const session = await ort.InferenceSession.create(bytes);
  try {
    const feeds = { predict: new ort.Tensor("float32", Float32Array.from(rows.flat()), [rows.length, 4]) };
    return { metadata: session.outputMetadata, outputs: await session.run(feeds) };
  } finally {
    await session.release();
  }
}

describe("unwrapZipMaps", () => {
  it("leaves a model without a ZipMap as the very same bytes", () => {
    for (const bytes of [
      buildLogisticRegressionBytes(),
      buildTreeClassifierBytes({ labels: "string" }),
      buildTwoInputBytes(),
      buildTinyModelBytes({ task: "classification" }),
    ]) {
      const unwrap = unwrapZipMaps(bytes);
      expect(unwrap.bytes).toBe(bytes);
      expect(unwrap.unwrapped).toEqual([]);
    }
  });

  it.each(["string", "int64"] as const)(
    "%s labels: ORT loads the rewrite, output_probability is FP32 [N, 3] of the tree's probabilities",
    async (kind) => {
      const labels = TREE_LABELS[kind];
      const original = buildTreeClassifierBytes({ labels: kind, zipMap: true });
      const unwrap = unwrapZipMaps(original);
      expect(unwrap.unwrapped).toEqual([{ output: "output_probability", input: "probabilities", labels }]);
      const { metadata, outputs } = await runTree(unwrap.bytes, ROWS);
      expect(metadata.map((m) => [m.name, m.isTensor && m.type])).toEqual([
        ["output_label", kind],
        ["output_probability", "float32"],
      ]);
      const probabilities = outputs.output_probability!;
      expect(probabilities.dims).toEqual([ROWS.length, 3]);
      expect(Array.from(probabilities.data as Float32Array)).toEqual(
        ROWS.flatMap((r) => treeReference(r).probabilities.map(Math.fround)),
      );
      const label = [...(outputs.output_label!.data as Iterable<string | bigint>)].map((v) =>
        typeof v === "bigint" ? Number(v) : v,
      );
      expect(label).toEqual(ROWS.map((r) => labels[treeReference(r).label]));
    },
  );

  it("changes only the ZipMap node and that output's type; every other field is copied as it came", () => {
    const original = buildTreeClassifierBytes({ labels: "string", zipMap: true });
    const before = decode(original);
    const after = decode(unwrapZipMaps(original).bytes);
    expect(after.graph.node[1]).toEqual({
      input: ["probabilities"],
      output: ["output_probability"],
      name: "zipmap",
      opType: "Identity",
    });
    expect(after.graph.output[1]).toEqual({
      name: "output_probability",
      type: { tensorType: { elemType: 1, shape: { dim: [{}, { dimValue: 3 }] } } },
    });
    const { graph: g1, ...restBefore } = before;
    const { graph: g2, ...restAfter } = after;
    expect(restAfter).toEqual(restBefore);
    expect({ ...g2, node: g2.node.slice(0, 1), output: g2.output.slice(0, 1) }).toEqual({
      ...g1,
      node: g1.node.slice(0, 1),
      output: g1.output.slice(0, 1),
    });
    // Byte for byte: the tree node (with its attributes) and the graph input are in the rewrite as they were.
    const graphOf = (bytes: Uint8Array) => {
      const g = readFields(bytes).find((f) => f.field === 7)!;
      return readFields(bytes, g.start, g.end).map((f) => Buffer.from(bytes.subarray(f.tagStart, f.end)));
    };
    const [treeNode, , ...rest] = graphOf(original);
    const rewritten = graphOf(unwrapZipMaps(original).bytes);
    expect(rewritten[0]).toEqual(treeNode);
    for (const field of rest.slice(0, -1)) expect(rewritten).toContainEqual(field); // name, input, output_label
  });

  it("reads int64 labels beyond 32 bits and negative ones; ORT loads the rewrite", async () => {
    const model = decode(buildTreeClassifierBytes({ labels: "int64", zipMap: true }));
    const labels = [-7, 3_000_000_000, 42];
    for (const node of model.graph.node) {
      for (const a of node.attribute as { name: string; ints: number[] }[])
        if (a.name === "classlabels_int64s") a.ints = labels;
    }
    const unwrap = unwrapZipMaps(encode(model));
    expect(unwrap.unwrapped[0]!.labels).toEqual(labels);
    const { outputs } = await runTree(unwrap.bytes, [ROWS[0]!]);
    expect(Number((outputs.output_label!.data as BigInt64Array)[0])).toBe(labels[2]);
    expect(outputs.output_probability!.dims).toEqual([1, 3]);
  });

  it("adds a default-domain opset import for the Identity when the model has none", async () => {
    const model = decode(buildTreeClassifierBytes({ labels: "string", zipMap: true }));
    model.opsetImport = model.opsetImport.filter((o) => o.domain === "ai.onnx.ml");
    const unwrap = unwrapZipMaps(encode(model));
    expect(decode(unwrap.bytes).opsetImport).toEqual([{ domain: "ai.onnx.ml", version: 3 }, { version: 13 }]);
    const { outputs } = await runTree(unwrap.bytes, [ROWS[1]!]);
    expect(Array.from(outputs.output_probability!.data as Float32Array)).toEqual([1, 0, 0]);
  });

  it("leaves a ZipMap whose output is not a graph output", () => {
    const model = decode(buildTreeClassifierBytes({ labels: "string", zipMap: true }));
    model.graph.output = model.graph.output.slice(0, 1);
    const bytes = encode(model);
    expect(unwrapZipMaps(bytes)).toEqual({ bytes, unwrapped: [] });
  });
});

describe("protobuf wire", () => {
  it("reads packed and unpacked varints; int64 as two's complement", () => {
    const values = [0, 1, 300, -1, 2 ** 40];
    const packed = lengthDelimited(8, concatBytes(values.map(encodeVarint)));
    const [f] = readFields(packed);
    expect(f).toMatchObject({ field: 8, wireType: 2, tagStart: 0, end: packed.length });
    expect(readVarints(packed, f!).map(toInt64)).toEqual(values);
    const unpacked = concatBytes([encodeVarint(8 * 8), encodeVarint(-5)]);
    expect(readVarints(unpacked, readFields(unpacked)[0]!).map(toInt64)).toEqual([-5]);
  });

  it("refuses a field that runs past the end", () => {
    expect(() => readFields(Uint8Array.from([0x0a, 0x05, 0x01]))).toThrow(/runs past the end/);
  });
});
