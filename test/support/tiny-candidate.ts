import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { buildTinyModelBytes, ModelProto, type TinyModel, tinyTokenizerJson } from "./tiny-onnx.js";

/**
 * A tiny embedding model that really differs from test/support/tiny-onnx.ts's (another file, so another
 * `model.version`, and other vectors): the token embedding table is scaled by `scale` and shifted.
 * Written as `<dir>/tiny-candidate.onnx` with its own `tokenizer.json` (same vocabulary).
 */
export async function createTinyCandidate(dir: string, scale = 2): Promise<TinyModel> {
  await mkdir(dir, { recursive: true });
  const proto = ModelProto.decode(buildTinyModelBytes({ task: "embedding" })) as unknown as {
    graph: { initializer: { name: string; rawData: Uint8Array }[] };
  };
  const emb = proto.graph.initializer.find((t) => t.name === "emb");
  if (!emb) throw new Error("tiny model without its emb initializer");
  const raw = Uint8Array.from(emb.rawData);
  const values = new Float32Array(raw.buffer, 0, raw.byteLength / 4).map(
    (v, i) => v * scale + (i % 3) * 0.25,
  );
  emb.rawData = new Uint8Array(values.buffer);
  const modelPath = join(dir, "tiny-candidate.onnx");
  const tokenizerPath = join(dir, "tokenizer.json");
  await writeFile(modelPath, ModelProto.encode(proto as never).finish());
  await writeFile(tokenizerPath, JSON.stringify(tinyTokenizerJson()));
  return { modelPath, tokenizerPath, labels: [] };
}

/** `SLUICE_CANDIDATE__*` environment that makes `sluice serve` load `tiny` as its candidate. */
export function tinyCandidateEnv(
  tiny: TinyModel,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    SLUICE_CANDIDATE__PATH: tiny.modelPath,
    SLUICE_CANDIDATE__TOKENIZER_PATH: tiny.tokenizerPath,
    SLUICE_CANDIDATE__NAME: "tiny-candidate",
    SLUICE_CANDIDATE__MAX_SEQUENCE_TOKENS: "32",
    SLUICE_CANDIDATE__WORKERS: "1",
    ...extra,
  };
}
