import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig, sluiceConfigSchema } from "../../../src/config/config-schema.js";
import { readEnvOverrides } from "../../../src/config/env-overrides.js";
import { modelSettings } from "../../../src/config/model-settings.js";
import { candidateRunnerOptionsFromConfig } from "../../../src/model/model-runner-config.js";
import { ModelSet } from "../../../src/model/model-set.js";
import { createTinyCandidate } from "../../support/tiny-candidate.js";
import { createTinyModel, type TinyModel } from "../../support/tiny-onnx.js";

describe("the candidate section", () => {
  it("is absent by default, and has every model key (each defaulted as in model) plus shadowShare", () => {
    expect(defaultConfig().candidate).toBeUndefined();
    const c = sluiceConfigSchema.parse({ candidate: { path: "/m/c.onnx" } }).candidate;
    const { path: _p, ...defaults } = defaultConfig().model;
    expect(c).toEqual({ ...defaults, path: "/m/c.onnx", shadowShare: 0 });
  });

  it("is settable from the environment like every key (SLUICE_CANDIDATE__PATH)", () => {
    const { values } = readEnvOverrides({
      SLUICE_CANDIDATE__PATH: "/m/c.onnx",
      SLUICE_CANDIDATE__SHADOW_SHARE: "0.25",
    });
    const c = sluiceConfigSchema.parse(values).candidate;
    expect(c?.path).toBe("/m/c.onnx");
    expect(c?.shadowShare).toBe(0.25);
  });

  it("refuses a shadow share outside 0..1 and a text candidate for a tensor model", () => {
    expect(sluiceConfigSchema.safeParse({ candidate: { shadowShare: 1.5 } }).success).toBe(false);
    const mixed = sluiceConfigSchema.safeParse({
      model: { task: "tensor", path: "/m/t.onnx" },
      candidate: { task: "embedding" },
    });
    expect(mixed.success).toBe(false);
    expect(JSON.stringify(mixed.error?.issues)).toContain("candidate");
  });

  it("maps to runner settings like model, naming candidate.* keys for its files", async () => {
    const config = sluiceConfigSchema.parse({
      candidate: { path: "/nowhere/c.onnx", tokenizerPath: "/nowhere/t.json" },
    });
    await expect(candidateRunnerOptionsFromConfig(config, () => {})).rejects.toThrow(/candidate\.path/);
    expect(await candidateRunnerOptionsFromConfig(defaultConfig(), () => {})).toBeUndefined();
  });
});

describe("ModelSet", () => {
  let dir: string;
  let serving: TinyModel;
  let candidate: TinyModel;
  let classifier: TinyModel;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-model-set-"));
    serving = await createTinyModel(join(dir, "serving"), { task: "embedding" });
    candidate = await createTinyCandidate(join(dir, "candidate"));
    classifier = await createTinyModel(join(dir, "classifier"), { task: "classification" });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const settings = (m: TinyModel, task: "embedding" | "classification" = "embedding") =>
    modelSettings({ modelPath: m.modelPath, tokenizerPath: m.tokenizerPath, task, workers: 1 });

  it("loads serving and candidate side by side, each with its version and load cost, found by version", async () => {
    const set = await ModelSet.load(settings(serving), settings(candidate));
    try {
      const s = set.serving.model.identity.version;
      const c = set.candidate?.model.identity.version as string;
      expect(c).not.toBe(s);
      expect(set.byVersion(s)).toBe(set.serving.model);
      expect(set.byVersion(c)).toBe(set.candidate?.model);
      expect(set.byVersion("000000000000")).toBeUndefined();
      expect(set.versions()).toEqual([s, c]);
      expect(set.roles.map((r) => r.role)).toEqual(["serving", "candidate"]);
      for (const r of set.roles) {
        expect(r.cost.loadMs).toBeGreaterThan(0);
        expect(r.cost.rssMiB).toBeGreaterThanOrEqual(0);
      }
      // Same task and output shape: nothing to warn about; but the vectors differ.
      expect(set.differences()).toEqual([]);
      const [a, b] = await Promise.all([
        set.serving.model.run(["hello world"]),
        set.candidate?.model.run(["hello world"]),
      ]);
      expect(JSON.stringify(a.outcomes)).not.toBe(JSON.stringify(b?.outcomes));
    } finally {
      await set.close();
    }
  });

  it("says when the candidate has another task or output shape", async () => {
    const set = await ModelSet.load(settings(serving), settings(classifier, "classification"));
    try {
      expect(set.differences()).toEqual(["task embedding → classification"]);
    } finally {
      await set.close();
    }
  });
});

describe("ModelSet.servingPort", () => {
  it("is the serving model for the processor, and the SLO guard's backfill limits reach every model", async () => {
    const limited: string[] = [];
    const fake = (version: string) =>
      ({
        identity: { name: version, version },
        task: "embedding",
        countTokens: () => 3,
        run: async () => ({ outcomes: [], stats: { inferenceMs: 0, realTokens: 0, paddedTokens: 0 } }),
        limitBackfill: () => limited.push(version),
        close: async () => {},
      }) as never;
    const cost = { rssMiB: 0, loadMs: 0 };
    const set = new ModelSet(
      { role: "serving", model: fake("s"), cost },
      { role: "candidate", model: fake("c"), cost },
    );
    const port = set.servingPort();
    expect(port.identity.version).toBe("s");
    expect(port.countTokens("x")).toBe(3);
    port.limitBackfill?.({ workerShare: 0.5, workerDepth: 1, sliceShare: 1, cpuCores: 1 });
    expect(limited).toEqual(["s", "c"]);
  });
});
