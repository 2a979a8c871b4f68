import type { InferenceOutput } from "../../contracts/inference.js";

export type Pooling = "cls" | "mean";

/**
 * Sentence embeddings from a model's output. A 3-D output [rows, seq, hidden] (e.g. BERT's
 * `last_hidden_state`) is pooled: `cls` takes position 0, `mean` averages the positions whose attention
 * mask is 1 (padding never leaks in). A 2-D output [rows, dim] is already pooled and used as is.
 * With `normalize`, each row is scaled to unit L2 norm (cosine similarity becomes a dot product).
 */
export function poolEmbeddings(
  output: Float32Array,
  dims: readonly number[],
  attentionMask: BigInt64Array,
  pooling: Pooling,
  normalize: boolean,
): { data: Float32Array; dim: number } {
  const rows = dims[0]!;
  let dim: number;
  let data: Float32Array;
  if (dims.length === 2) {
    dim = dims[1]!;
    data = output.slice(0, rows * dim);
  } else if (dims.length === 3) {
    const seq = dims[1]!;
    dim = dims[2]!;
    data = new Float32Array(rows * dim);
    for (let r = 0; r < rows; r++) {
      const dst = r * dim;
      if (pooling === "cls") {
        data.set(output.subarray(r * seq * dim, r * seq * dim + dim), dst);
        continue;
      }
      let count = 0;
      for (let s = 0; s < seq; s++) {
        if (attentionMask[r * seq + s] === 0n) continue;
        count++;
        const src = (r * seq + s) * dim;
        for (let h = 0; h < dim; h++) data[dst + h]! += output[src + h]!;
      }
      if (count > 0) for (let h = 0; h < dim; h++) data[dst + h]! /= count;
    }
  } else {
    throw new Error(`embedding output must be 2-D or 3-D, got shape [${dims.join(", ")}]`);
  }
  if (normalize) {
    for (let r = 0; r < rows; r++) {
      let sum = 0;
      for (let h = 0; h < dim; h++) sum += data[r * dim + h]! ** 2;
      const norm = Math.sqrt(sum);
      // A zero vector stays zero rather than becoming NaN.
      if (norm > 0) for (let h = 0; h < dim; h++) data[r * dim + h]! /= norm;
    }
  }
  return { data, dim };
}

export function embeddingOutput(row: Float32Array): InferenceOutput {
  return { embedding: Array.from(row) };
}
