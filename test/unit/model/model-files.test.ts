import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { resolveModelFiles } from "../../../src/model/model-files.js";
import { modelRunnerOptionsFromConfig } from "../../../src/model/model-runner-config.js";

const settings = {
  model: "model.path (SLUICE_MODEL__PATH)",
  tokenizer: "model.tokenizerPath (SLUICE_MODEL__TOKENIZER_PATH)",
};

function folder(files: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-model-files-"));
  for (const f of files) writeFileSync(join(dir, f), "x");
  return dir;
}

async function serveOptionsError(model: Partial<ReturnType<typeof defaultConfig>["model"]>): Promise<Error> {
  const config = defaultConfig();
  return modelRunnerOptionsFromConfig({ ...config, model: { ...config.model, ...model } }, () => {}).then(
    () => {
      throw new Error("expected a failure");
    },
    (e: Error) => e,
  );
}

describe("resolveModelFiles (model.path / model.tokenizerPath)", () => {
  it("uses tokenizer.json next to the model when no tokenizer is given", () => {
    const dir = folder(["model.onnx", "tokenizer.json"]);
    expect(resolveModelFiles({ modelPath: join(dir, "model.onnx") }, settings)).toEqual({
      modelPath: join(dir, "model.onnx"),
      tokenizerPath: join(dir, "tokenizer.json"),
    });
  });

  it("a missing model file is reported as that, naming the key and its variable (not the tokenizer, not --model)", async () => {
    const error = await serveOptionsError({ path: "/nonexistent/model.onnx" });
    expect(error).toMatchObject({ code: "MODEL_NOT_FOUND" });
    expect(error.message).toContain(
      "model.path (SLUICE_MODEL__PATH) = /nonexistent/model.onnx: no such file",
    );
    expect(error.message).not.toMatch(/tokenizer|--model/);
  });

  it("a model without a tokenizer next to it asks for model.tokenizerPath", async () => {
    const dir = folder(["model.onnx"]);
    const error = await serveOptionsError({ path: join(dir, "model.onnx") });
    expect(error).toMatchObject({ code: "CONFIG_INVALID" });
    expect(error.message).toContain("no tokenizer.json next to it");
    expect(error.message).toContain("model.tokenizerPath (SLUICE_MODEL__TOKENIZER_PATH)");
    expect(error.message).not.toContain("--");
  });

  it("a given tokenizer path that does not exist is named; a folder is not a model file", () => {
    const dir = folder(["model.onnx"]);
    mkdirSync(join(dir, "sub"));
    expect(() =>
      resolveModelFiles(
        { modelPath: join(dir, "model.onnx"), tokenizerPath: join(dir, "nope.json") },
        settings,
      ),
    ).toThrow(/model\.tokenizerPath \(SLUICE_MODEL__TOKENIZER_PATH\) = .*nope\.json: no such file/);
    expect(() => resolveModelFiles({ modelPath: join(dir, "sub") }, settings)).toThrow(/: not a file/);
  });
});
