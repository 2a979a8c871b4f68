import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelSettings } from "../../src/config/model-settings.js";
import { encodeRequest, RequestDecoder } from "../../src/contracts/request-codec.js";
import { ResultEncoder } from "../../src/contracts/result-codec.js";
import { decodeV2Response } from "../../src/contracts/v2-json-codec.js";
import { ensureDefaultModel } from "../../src/model/default-model.js";
import { modelInputOf } from "../../src/model/model-port.js";
import { ModelRunner } from "../../src/model/model-runner.js";

// A BYTES V2 request to the real default model (int8 BGE-small) goes through the tokenizer path and
// returns exactly the embedding of the JSON {id, text} request: both decoded by the configured
// codec, both fed to the model the way the processor feeds it (modelInputOf).
let runner: ModelRunner;

beforeAll(async () => {
  const files = await ensureDefaultModel();
  runner = await ModelRunner.create(
    modelSettings({
      modelPath: files.modelPath,
      tokenizerPath: files.tokenizerPath,
      name: files.name,
      workers: 1,
    }),
  );
}, 300_000);
afterAll(() => runner?.close());

describe("V2 BYTES request to the default text model", () => {
  it("returns the same embedding as the JSON {id, text} request", async () => {
    const text = "Kafka transactions make results visible atomically.";
    const fromJson = new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1 << 20 });
    const fromV2 = new RequestDecoder({ defaultCodec: "v2-json", maxMessageBytes: 1 << 20 });
    const j = encodeRequest({ id: "a", text }, "json");
    const v = encodeRequest({ id: "a", text }, "v2-json");
    const a = fromJson.decode(j.value, j.headers);
    const b = fromV2.decode(v.value, v.headers);
    if (!a.ok || !b.ok) throw new Error("decode failed");
    const { outcomes } = await runner.run([a.request, b.request].map((r) => modelInputOf(runner.task, r)));
    const [ja, vb] = outcomes;
    if (!ja?.ok || !vb?.ok) throw new Error(`model failed: ${JSON.stringify(outcomes)}`);
    expect(ja.output.embedding).toHaveLength(384);
    expect(vb.output.embedding).toEqual(ja.output.embedding);
    // And the V2 response carries it as an FP32 [1, 384] output.
    const response = decodeV2Response(
      new ResultEncoder({ codec: "v2-json" }).encode({
        id: "a",
        status: "ok",
        output: vb.output,
        model: runner.identity,
        source: { topic: "t", partition: 0, offset: "0" },
        timing: { requestTimestamp: 0, queueMs: 0, inferenceMs: 0, batchSize: 1, completedAt: 0 },
        attributes: null,
      }).value,
    );
    expect(response.outputs[0]).toMatchObject({ name: "embedding", datatype: "FP32", shape: [1, 384] });
    expect(response.outputs[0]!.data).toEqual(ja.output.embedding);
  }, 120_000);
});
