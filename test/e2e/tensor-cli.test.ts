import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { builtCli } from "../support/built-cli.js";
import {
  createTinyTensorModels,
  IRIS_REQUEST,
  lrReference,
  type TinyTensorModels,
} from "../support/tiny-tensor-onnx.js";

const run = promisify(execFile);
const repoRoot = resolve(import.meta.dirname, "../..");
const sluice = (args: string[]) =>
  run(process.execPath, [builtCli(), ...args], { cwd: repoRoot }).catch(
    (e: { stdout: string; code: number }) => ({ stdout: e.stdout, code: e.code }),
  );

const inferLr = (request: object) =>
  sluice(["infer", "--task", "tensor", "--model", models.lr, "--v2", JSON.stringify(request)]);

let dir: string;
let models: TinyTensorModels;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-tensor-cli-"));
  models = await createTinyTensorModels(dir);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("sluice model info / infer with model.task tensor", () => {
  it("model info prints the tensor signature, a ZipMap output unwrapped with its labels", async () => {
    const { stdout } = await sluice(["model", "info", "--task", "tensor", "--model", models.treeZipMap]);
    expect(stdout).toContain("inputs:      predict FP32[-1,4]");
    expect(stdout).toContain("outputs:     output_label BYTES[-1], output_probability FP32[-1,3]");
    expect(stdout).toContain("labels:      output_probability: setosa, versicolor, virginica");
    expect(stdout).not.toContain("left out");
  }, 60_000);

  it("infer --v2 answers MLServer's iris request with a V2 response; a misfit exits 1 with its code", async () => {
    const ok = await inferLr(IRIS_REQUEST);
    const response = JSON.parse(ok.stdout);
    expect(response.parameters.status).toBe("ok");
    expect(response.outputs[0].data[0]).toBeCloseTo(lrReference([1, 2, 3, 4]), 6);
    const bad = { inputs: [{ name: "predict", shape: [1, 3], datatype: "FP32", data: [1, 2, 3] }] };
    const failed = await inferLr(bad);
    expect("code" in failed && failed.code).toBe(1);
    expect(JSON.parse(failed.stdout).parameters.error_code).toBe("TENSOR_SHAPE_MISMATCH");
  }, 60_000);
});
