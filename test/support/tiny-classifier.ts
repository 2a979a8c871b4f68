import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { modelSettings } from "../../src/config/model-settings.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import { createTinyModel } from "./tiny-onnx.js";

/** The tiny classifier (test/support/tiny-onnx.ts) written to `dir` and loaded, as the processor tests run it. */
export async function startTinyClassifier(dir: string): Promise<TextModelRunner> {
  const tiny = await createTinyModel(dir, { task: "classification" });
  return TextModelRunner.create(
    modelSettings({
      modelPath: tiny.modelPath,
      tokenizerPath: tiny.tokenizerPath,
      task: "classification",
      labels: tiny.labels,
      name: "tiny-classifier",
    }),
  );
}

/**
 * One tiny classifier for the whole suite (call inside `describe`): loaded in beforeAll, closed and
 * its files removed in afterAll. The getter gives the loaded model inside the tests.
 */
export function tinyClassifierForSuite(prefix: string): () => TextModelRunner {
  let dir: string | undefined;
  let model: TextModelRunner | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
    model = await startTinyClassifier(dir);
  });
  afterAll(async () => {
    await model?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  return () => {
    if (!model) throw new Error("the tiny classifier is not loaded yet (use it inside a test)");
    return model;
  };
}
