import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { modelSettings } from "../../src/config/model-settings.js";
import type { InferenceRequest } from "../../src/contracts/inference.js";
import { encodeRequest, RequestDecoder } from "../../src/contracts/request-codec.js";
import { ResultEncoder } from "../../src/contracts/result-codec.js";
import { decodeV2Response } from "../../src/contracts/v2-json-codec.js";
import { ensureDefaultModel } from "../../src/model/default-model.js";
import { modelInputOf } from "../../src/model/model-port.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import { createTopics, produceMessages, uniqueName } from "../support/kafka-harness.js";
import { killLeftovers, type ServeProcess, serveAndRead, serveEnv } from "../support/serve-process.js";

// A BYTES V2 request to the real default model (int8 BGE-small) goes through the tokenizer path and
// returns exactly the embedding of the JSON {id, text} request: both decoded by the configured
// codec, both fed to the model the way the processor feeds it (modelInputOf); and through a real
// `sluice serve` with the V2 JSON codecs on the real broker, read at read_committed.
const TEXT = "Kafka transactions make results visible atomically.";
let runner: TextModelRunner;
const procs: ServeProcess[] = [];

beforeAll(async () => {
  const files = await ensureDefaultModel();
  runner = await TextModelRunner.create(
    modelSettings({
      modelPath: files.modelPath,
      tokenizerPath: files.tokenizerPath,
      name: files.name,
      workers: 1,
    }),
  );
}, 300_000);
afterEach(() => killLeftovers(procs));
afterAll(() => runner?.close());

/** `{id, text}` as the given request codec writes it and the processor's decoder reads it back. */
function decoded(codec: "json" | "v2-json", id: string): InferenceRequest {
  const { value, headers } = encodeRequest({ id, text: TEXT }, codec);
  const outcome = new RequestDecoder({ defaultCodec: codec, maxMessageBytes: 1 << 20 }).decode(
    value,
    headers,
  );
  if (!outcome.ok) throw new Error(`${codec} decode failed: ${JSON.stringify(outcome)}`);
  return outcome.request;
}

/** The embeddings the in-process default model gives the requests, fed as the processor feeds them. */
async function embed(requests: InferenceRequest[]) {
  const { outcomes } = await runner.run(requests.map((r) => modelInputOf(runner.task, r)));
  return outcomes.map((o) => {
    if (!o?.ok || o.output.embedding === undefined) throw new Error(`model failed: ${JSON.stringify(o)}`);
    return o.output;
  });
}

describe("V2 BYTES request to the default text model", () => {
  it("returns the same embedding as the JSON {id, text} request", async () => {
    const [ja, vb] = await embed([decoded("json", "a"), decoded("v2-json", "a")]);
    expect(ja!.embedding).toHaveLength(384);
    expect(vb!.embedding).toEqual(ja!.embedding);
    // And the V2 response carries it as an FP32 [1, 384] output.
    const response = decodeV2Response(
      new ResultEncoder({ codec: "v2-json" }).encode({
        id: "a",
        status: "ok",
        output: vb!,
        model: runner.identity,
        source: { topic: "t", partition: 0, offset: "0" },
        timing: { requestTimestamp: 0, queueMs: 0, inferenceMs: 0, batchSize: 1, completedAt: 0 },
        attributes: null,
      }).value,
    );
    expect(response.outputs[0]).toMatchObject({ name: "embedding", datatype: "FP32", shape: [1, 384] });
    expect(response.outputs[0]!.data).toEqual(ja!.embedding);
  }, 120_000);

  it("through sluice serve (topics.requestCodec and resultCodec v2-json): the V2 response has the JSON request's embedding", async () => {
    const base = uniqueName("v2-text");
    await createTopics([{ topic: `${base}.requests`, numPartitions: 1 }]);
    const { value, headers } = encodeRequest({ id: "v2-bytes", text: TEXT }, "v2-json");
    expect(JSON.parse(value.toString()).inputs).toEqual([
      { name: "text", shape: [1], datatype: "BYTES", data: [TEXT] },
    ]);
    await produceMessages(`${base}.requests`, [{ key: "v2-bytes", value, headers }]);
    const {
      records: [results],
    } = await serveAndRead(
      procs,
      serveEnv(base, { SLUICE_TOPICS__REQUEST_CODEC: "v2-json", SLUICE_TOPICS__RESULT_CODEC: "v2-json" }),
      [{ topic: `${base}.results`, expected: 1 }],
    );
    expect(results).toHaveLength(1);
    const response = decodeV2Response(results![0]!.value as Buffer);
    expect(response).toMatchObject({
      id: "v2-bytes",
      model_name: runner.identity.name,
      model_version: runner.identity.version,
      parameters: { status: "ok" },
    });
    expect(response.outputs).toHaveLength(1);
    expect(response.outputs[0]).toMatchObject({ name: "embedding", datatype: "FP32", shape: [1, 384] });
    const [fromJson] = await embed([decoded("json", "v2-bytes")]);
    expect(response.outputs[0]!.data).toEqual(fromJson!.embedding);
  }, 240_000);
});
