import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeV2Response, type V2InferenceResponse } from "../../src/contracts/v2-json-codec.js";
import { createTopics, produceMessages, uniqueName } from "../support/kafka-harness.js";
import {
  killLeftovers,
  type ReadRecord,
  type ServeProcess,
  serveAndRead,
  serveEnv,
} from "../support/serve-process.js";
import {
  createTinyTensorModels,
  IRIS_REQUEST,
  lrReference,
  type TinyTensorModels,
  TREE_LABELS,
  treeReference,
} from "../support/tiny-tensor-onnx.js";

// `sluice serve` with model.task tensor and the V2 JSON codecs against the real broker: MLServer's
// sklearn iris request gets a V2 response exactly once (read_committed); each kind of bad tensor is a
// dead letter with its named code and shape headers, and its neighbours still get results.
let dir: string;
let models: TinyTensorModels;
const procs: ServeProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tensor-e2e-"));
  models = await createTinyTensorModels(dir);
});
afterEach(() => killLeftovers(procs));
afterAll(() => rm(dir, { recursive: true, force: true }));

const v2 = (body: object, headers: Record<string, string> = {}) => ({
  value: Buffer.from(JSON.stringify(body), "utf8"),
  headers: { "content-type": "application/json", ...headers },
});
const header = (r: ReadRecord, name: string) => r.headers[name]?.toString();

async function serveTensorModel(
  modelPath: string,
  messages: { key: string; value: Buffer; headers: Record<string, string> }[],
  expected: { results: number; deadLetters: number },
) {
  const base = uniqueName("tensor");
  await createTopics([{ topic: `${base}.requests`, numPartitions: 2 }]);
  await produceMessages(`${base}.requests`, messages);
  const {
    records: [results, deadLetters],
    output,
  } = await serveAndRead(
    procs,
    serveEnv(base, {
      SLUICE_MODEL__TASK: "tensor",
      SLUICE_MODEL__PATH: modelPath,
      SLUICE_MODEL__NAME: "tiny-tabular",
      SLUICE_MODEL__WORKERS: "1",
      SLUICE_TOPICS__REQUEST_CODEC: "v2-json",
      SLUICE_TOPICS__RESULT_CODEC: "v2-json",
      SLUICE_BATCHING__MAX_BATCH_SIZE: "4",
    }),
    [
      { topic: `${base}.results`, expected: expected.results },
      { topic: `${base}.dlq`, expected: expected.deadLetters, timeoutMs: 30_000 },
    ],
  );
  const byId = new Map<string, { response: V2InferenceResponse; record: ReadRecord }[]>();
  for (const record of results!) {
    const response = decodeV2Response(record.value as Buffer);
    byId.set(response.id, [...(byId.get(response.id) ?? []), { response, record }]);
  }
  return { byId, results: results!, deadLetters: deadLetters!, output };
}

describe("sluice serve, model.task tensor, V2 JSON on Kafka", () => {
  it("logistic regression: the iris request gets one V2 response; bad tensors are dead letters", async () => {
    const rows = [
      [1, 2, 3, 4],
      [5.1, 3.5, 1.4, 0.2],
      [6.3, 3.3, 6, 2.5],
    ];
    const fp32 = (data: unknown, shape: number[], name = "predict", datatype = "FP32") => ({
      inputs: [{ name, shape, datatype, data }],
    });
    const bad: [string, object, string, Record<string, string>][] = [
      [
        "missing",
        fp32([[1, 2, 3, 4]], [1, 4], "other"),
        "TENSOR_INPUT_UNKNOWN",
        { "sluice.error.input": "other" },
      ],
      [
        "dtype",
        fp32([1, 2, 3, 4], [1, 4], "predict", "FP64"),
        "TENSOR_DATATYPE_MISMATCH",
        { "sluice.error.expected-datatype": "FP32", "sluice.error.actual-datatype": "FP64" },
      ],
      [
        "shape",
        fp32([1, 2, 3], [1, 3]),
        "TENSOR_SHAPE_MISMATCH",
        { "sluice.error.expected-shape": "[-1,4]", "sluice.error.actual-shape": "[1,3]" },
      ],
      [
        "nonfinite",
        fp32([1, 3e39, 3, 4], [1, 4]),
        "TENSOR_NON_FINITE",
        { "sluice.error.element-index": "1" },
      ],
      [
        "rows",
        fp32(Array(5).fill([1, 2, 3, 4]), [5, 4]),
        "TENSOR_TOO_MANY_ROWS",
        { "sluice.error.max-rows": "4" },
      ],
      ["count", fp32([1, 2, 3], [1, 4]), "SCHEMA_VIOLATION", {}],
    ];
    const messages = [
      // MLServer's request, the id in Seldon's x-request-id header; then the same id again (a duplicate).
      { key: "iris-1", ...v2(IRIS_REQUEST, { "x-request-id": "iris-1" }) },
      ...bad.map(([id, body]) => ({ key: id, ...v2({ id, ...body }) })),
      { key: "multi", ...v2({ id: "multi", ...fp32(rows, [3, 4]) }) },
      { key: "iris-1", ...v2(IRIS_REQUEST, { "x-request-id": "iris-1" }) },
    ];
    const { byId, results, deadLetters, output } = await serveTensorModel(models.lr, messages, {
      results: 2,
      deadLetters: bad.length,
    });
    expect(results.length, output.slice(-3000)).toBe(2);
    const iris = byId.get("iris-1")!;
    expect(iris).toHaveLength(1);
    const { response, record } = iris[0]!;
    expect(header(record, "x-request-id")).toBe("iris-1");
    expect(response).toMatchObject({
      model_name: "tiny-tabular",
      id: "iris-1",
      parameters: { status: "ok" },
    });
    expect(response.model_version).toMatch(/^[0-9a-f]{12}$/);
    expect(response.outputs).toHaveLength(1);
    expect(response.outputs[0]).toMatchObject({ name: "probability", datatype: "FP32", shape: [1, 1] });
    expect(response.outputs[0]!.data[0] as number).toBeCloseTo(lrReference([1, 2, 3, 4]), 6);
    const multi = byId.get("multi")![0]!.response.outputs[0]!;
    expect(multi.shape).toEqual([3, 1]);
    rows.forEach((r, i) => {
      expect(multi.data[i] as number).toBeCloseTo(lrReference(r), 6);
    });

    const lettered = deadLetters.map(
      (d) => `${d.key} ${header(d, "sluice.error.code")} p${d.partition}@${d.offset}`,
    );
    expect(lettered, output.slice(-3000)).toHaveLength(bad.length);
    const dlByKey = new Map(deadLetters.map((d) => [d.key, d]));
    for (const [id, , code, headers] of bad) {
      const dl = dlByKey.get(id)!;
      expect(dl, id).toBeDefined();
      expect(header(dl, "sluice.error.code"), id).toBe(code);
      expect(header(dl, "sluice.error.stage"), id).toBe("validate");
      for (const [name, value] of Object.entries(headers))
        expect(header(dl, name), `${id} ${name}`).toBe(value);
    }
  }, 240_000);

  const trees = [
    { model: "treeStrings", label: "label", scores: "probabilities", labels: TREE_LABELS.string },
    // skl2onnx's default export: the ZipMap output comes back as a tensor under its name, labels beside.
    { model: "treeZipMap", label: "output_label", scores: "output_probability", labels: TREE_LABELS.string },
    {
      model: "treeZipMapInts",
      label: "output_label",
      scores: "output_probability",
      labels: TREE_LABELS.int64,
    },
  ] as const;
  it.each(trees)(
    "tree ensemble classifier ($model): labels and probabilities as plain V2 outputs",
    async (tree) => {
      const x = [
        [1, 2, 3, 4],
        [5.1, 3.5, 1.4, 0.2],
        [6.2, 2.9, 4.3, 1.3],
      ];
      const messages = x.map((row, i) => ({
        key: `t${i}`,
        ...v2({ id: `t${i}`, inputs: [{ name: "predict", shape: [1, 4], datatype: "FP32", data: [row] }] }),
      }));
      const { byId } = await serveTensorModel(models[tree.model], messages, { results: 3, deadLetters: 0 });
      const zipMap = tree.scores === "output_probability";
      x.forEach((row, i) => {
        const got = byId.get(`t${i}`)!;
        expect(got).toHaveLength(1);
        const out = Object.fromEntries(got[0]!.response.outputs.map((o) => [o.name, o]));
        expect(Object.keys(out)).toEqual([tree.label, tree.scores]);
        const want = treeReference(row);
        expect(out[tree.label]).toEqual({
          name: tree.label,
          datatype: typeof tree.labels[0] === "string" ? "BYTES" : "INT64",
          shape: [1],
          data: [tree.labels[want.label]],
        });
        expect(out[tree.scores]).toMatchObject({
          name: tree.scores,
          datatype: "FP32",
          shape: [1, 3],
          ...(zipMap ? { parameters: { labels: JSON.stringify(tree.labels) } } : {}),
        });
        (out[tree.scores]!.data as number[]).forEach((p, c) => {
          expect(p).toBeCloseTo(want.probabilities[c]!, 6);
        });
      });
    },
    240_000,
  );

  it("two named inputs: a request without one of them is TENSOR_INPUT_MISSING; its neighbour gets a result", async () => {
    const age = { name: "age", shape: [1, 1], datatype: "FP32", data: [6] };
    const visits = { name: "visits", shape: [1, 1], datatype: "INT64", data: [3] };
    const { byId, deadLetters } = await serveTensorModel(
      models.twoInputs,
      [
        { key: "both", ...v2({ id: "both", inputs: [visits, age] }) },
        { key: "half", ...v2({ id: "half", inputs: [age] }) },
      ],
      { results: 1, deadLetters: 1 },
    );
    const out = Object.fromEntries(byId.get("both")![0]!.response.outputs.map((o) => [o.name, o.data]));
    expect(out).toEqual({ score: [15], high: [true] });
    expect(deadLetters).toHaveLength(1);
    expect(header(deadLetters[0]!, "sluice.error.code")).toBe("TENSOR_INPUT_MISSING");
    expect(header(deadLetters[0]!, "sluice.error.input")).toBe("visits");
  }, 240_000);
});
