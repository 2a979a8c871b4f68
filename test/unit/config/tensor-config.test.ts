import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { isSluiceError } from "../../../src/sluice-error.js";

describe("model.task tensor in the configuration", () => {
  it("accepts the V2 codecs and refuses an Avro result codec, naming the key", () => {
    const config = loadConfig({
      env: {
        SLUICE_MODEL__TASK: "tensor",
        SLUICE_TOPICS__REQUEST_CODEC: "v2-json",
        SLUICE_TOPICS__RESULT_CODEC: "v2-json",
      },
    });
    expect([config.model.task, config.topics.requestCodec, config.topics.resultCodec]).toEqual([
      "tensor",
      "v2-json",
      "v2-json",
    ]);
    let error: unknown;
    try {
      loadConfig({ env: { SLUICE_MODEL__TASK: "tensor", SLUICE_TOPICS__RESULT_CODEC: "avro" } });
    } catch (e) {
      error = e;
    }
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect((error as Error).message).toMatch(
      /topics\.resultCodec.*must be json or v2-json when model\.task is tensor/s,
    );
  });
});
