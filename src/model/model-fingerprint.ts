import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";

/** SHA-256 of a file, hex, streamed (model files can be hundreds of MB). */
export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export interface ModelFingerprint {
  /** First 12 hex digits of SHA-256 over the model file bytes followed by the tokenizer file bytes. */
  version: string;
  modelSha256: string;
  tokenizerSha256: string;
}

/** Identity of a model + tokenizer pair: changing either file changes `version`. */
export function fingerprintModel(modelBytes: Uint8Array, tokenizerBytes: Uint8Array): ModelFingerprint {
  return {
    version: createHash("sha256").update(modelBytes).update(tokenizerBytes).digest("hex").slice(0, 12),
    modelSha256: createHash("sha256").update(modelBytes).digest("hex"),
    tokenizerSha256: createHash("sha256").update(tokenizerBytes).digest("hex"),
  };
}
