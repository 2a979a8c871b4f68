import { describe, expect, it } from "vitest";
import {
  AUTO_MAX_BATCH_SIZE,
  defaultConfig,
  maxBatchSize,
  modelSchema,
  type SluiceConfig,
} from "../../../src/config/config-schema.js";
import { modelSettings } from "../../../src/config/model-settings.js";
import { modelRunnerOptionsFromConfig } from "../../../src/model/model-runner-config.js";
import { resolveBackfillWorkerCount } from "../../../src/model/worker-count.js";
import { isSluiceError } from "../../../src/sluice-error.js";
import {
  configWithEveryModelKey,
  everyModelKey,
  modelPath,
  tokenizerPath,
} from "../../support/every-model-key.js";

const schemaKeys = Object.keys(modelSchema.shape) as (keyof SluiceConfig["model"])[];

describe("the one config → TextModelRunner mapping", () => {
  it("the fixture sets every model key to a non-default value (so the next test covers them all)", () => {
    const defaults = defaultConfig().model;
    const unset = schemaKeys.filter((k) => everyModelKey[k] === undefined);
    const asDefault = schemaKeys.filter(
      (k) => JSON.stringify(everyModelKey[k]) === JSON.stringify(defaults[k]),
    );
    expect({ unset, asDefault }).toEqual({ unset: [], asDefault: [] });
  });

  it("every key of the model section reaches the runner settings; path/tokenizerPath become the files", async () => {
    const settings = await modelRunnerOptionsFromConfig(configWithEveryModelKey(), () => {});
    const { path: _path, tokenizerPath: _tokenizer, ...passed } = everyModelKey;
    expect(settings).toEqual({
      ...passed,
      modelPath,
      tokenizerPath,
      bucketing: false,
      maxRequestRows: maxBatchSize(configWithEveryModelKey().batching, configWithEveryModelKey().model.task),
      backfillLane: false,
    });
    const dropped = schemaKeys.filter(
      (k) =>
        k !== "path" &&
        k !== "tokenizerPath" &&
        JSON.stringify(settings[k]) !== JSON.stringify(everyModelKey[k]),
    );
    expect(dropped).toEqual([]);
  });
});

describe("modelSettings (programmatic callers)", () => {
  it("fills what is not given with the configuration's defaults", () => {
    const { path: _p, tokenizerPath: _t, ...defaults } = defaultConfig().model;
    expect(modelSettings({ modelPath, tokenizerPath })).toEqual({
      ...defaults,
      modelPath,
      tokenizerPath,
      bucketing: defaultConfig().batching.bucketing,
      maxRequestRows: AUTO_MAX_BATCH_SIZE.text,
      backfillLane: false,
    });
  });

  it("an instance with a backfill lane says so, for model.backfillWorkers: auto", async () => {
    const config = configWithEveryModelKey();
    const settings = await modelRunnerOptionsFromConfig(
      { ...config, topics: { ...config.topics, backfill: ["corpus.backfill"] } },
      () => {},
    );
    expect(settings.backfillLane).toBe(true);
    expect(resolveBackfillWorkerCount("auto", 3, settings.backfillLane)).toBe(3);
    expect(resolveBackfillWorkerCount("auto", 3, false)).toBe(0);
    expect(resolveBackfillWorkerCount(0, 3, true)).toBe(0);
    expect(resolveBackfillWorkerCount(2, 3, false)).toBe(2);
  });

  it("validates with the schema's bounds and names the configuration key", () => {
    for (const [bad, key] of [
      [{ workers: 0 }, "model.workers"],
      [{ maxSequenceTokens: 8193 }, "model.maxSequenceTokens"],
      [{ inputNames: { input_id: "ids" } }, "model.inputNames"],
      [{ backfillSliceRows: 4097 }, "model.backfillSliceRows"],
      [{ backfillNice: 20 }, "model.backfillNice"],
      [{ backfillWorkers: -1 }, "model.backfillWorkers"],
    ] as const) {
      const error = (() => {
        try {
          modelSettings({ modelPath, tokenizerPath, ...(bad as object) });
        } catch (e) {
          return e;
        }
      })();
      expect(isSluiceError(error, "CONFIG_INVALID"), key).toBe(true);
      expect((error as Error).message).toContain(key);
    }
  });
});
