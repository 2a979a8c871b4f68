import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RequestDecoder } from "../../src/contracts/request-codec.js";
import { runCli } from "../support/cli-process.js";
import { committedRecords, createTopics, testBrokers, uniqueName } from "../support/kafka-harness.js";
import { createTinyTensorModels, type TinyTensorModels } from "../support/tiny-tensor-onnx.js";

// `sluice backfill submit` with a tensor model and topics.requestCodec v2-json: feature rows and V2
// request lines land on the backfill topic as V2 requests carrying the same tensors, which is what
// `sluice serve` then reads there with the same decoder.
let dir: string;
let models: TinyTensorModels;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tensor-backfill-"));
  models = await createTinyTensorModels(join(dir, "models"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("sluice backfill submit with model.task tensor", () => {
  it("submits --features CSV rows as V2 requests on the backfill topic", async () => {
    const base = uniqueName("tbf");
    await createTopics([{ topic: `${base}.backfill`, numPartitions: 1 }]);
    const input = join(dir, "rows.csv");
    await writeFile(input, "id,a,b,c,d\nx1,1,2,3,4\nx2,5,6,7,8\nbad,1,,3,4\n");
    const res = await runCli(
      [
        "backfill",
        "submit",
        "--input",
        input,
        "--run-id",
        "t1",
        "--features",
        "a,b,c,d",
        "--feature-input",
        "predict",
      ],
      {
        KAFKA_BROKERS: testBrokers().join(","),
        SLUICE_MODEL__TASK: "tensor",
        SLUICE_MODEL__PATH: models.lr,
        SLUICE_TOPICS__REQUEST_CODEC: "v2-json",
        SLUICE_TOPICS__RESULT_CODEC: "v2-json",
        SLUICE_TOPICS__BACKFILL: `${base}.backfill`,
        SLUICE_TOPICS__RUNS: `${base}.runs`,
        SLUICE_TOPICS__RESULTS: `${base}.results`,
      },
    );
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain("2 rows on");
    expect(res.stdout).toContain("1 invalid");
    const decoder = new RequestDecoder({ defaultCodec: "v2-json", maxMessageBytes: 1 << 20 });
    const records = await committedRecords(`${base}.backfill`);
    const decoded = records.map((r) => decoder.decode(r.value, r.headers as Record<string, string>));
    expect(decoded.map((d) => d.ok && [d.request.id, d.request.tensors?.inputs])).toEqual([
      ["x1", [{ name: "predict", datatype: "FP32", shape: [1, 4], data: [1, 2, 3, 4] }]],
      ["x2", [{ name: "predict", datatype: "FP32", shape: [1, 4], data: [5, 6, 7, 8] }]],
    ]);
  }, 120_000);
});
