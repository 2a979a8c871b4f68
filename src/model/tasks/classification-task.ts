import type { InferenceOutput } from "../../contracts/inference.js";

/** Row-wise softmax of logits [rows, classes]; subtracts the row max first so exp never overflows. */
export function softmaxRows(
  logits: Float32Array,
  dims: readonly number[],
): { data: Float32Array; dim: number } {
  if (dims.length !== 2) {
    throw new Error(`classification output must be 2-D [batch, classes], got shape [${dims.join(", ")}]`);
  }
  const rows = dims[0]!;
  const dim = dims[1]!;
  const data = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let max = Number.NEGATIVE_INFINITY;
    for (let c = 0; c < dim; c++) max = Math.max(max, logits[r * dim + c]!);
    let sum = 0;
    for (let c = 0; c < dim; c++) {
      const e = Math.exp(logits[r * dim + c]! - max);
      data[r * dim + c] = e;
      sum += e;
    }
    for (let c = 0; c < dim; c++) data[r * dim + c]! /= sum;
  }
  return { data, dim };
}

/** `label` is the most probable class (first one on ties); `scores` maps every label to its probability. */
export function classificationOutput(
  probabilities: Float32Array,
  labels: readonly string[],
): InferenceOutput {
  let best = 0;
  const scores: Record<string, number> = {};
  for (let c = 0; c < probabilities.length; c++) {
    scores[labels[c] ?? `LABEL_${c}`] = probabilities[c]!;
    if (probabilities[c]! > probabilities[best]!) best = c;
  }
  return { label: labels[best] ?? `LABEL_${best}`, scores };
}

/**
 * Label names from ONNX `metadata_props`: `id2label` as a JSON object {"0": "neg", …} or array, or a
 * comma-separated `labels` entry. Returns null when the model carries none.
 */
export function labelsFromMetadata(metadata: Record<string, string>): string[] | null {
  const id2label = metadata["id2label"];
  if (id2label !== undefined) {
    try {
      const parsed: unknown = JSON.parse(id2label);
      if (Array.isArray(parsed)) return parsed.map(String);
      if (parsed !== null && typeof parsed === "object") {
        const entries = Object.entries(parsed as Record<string, unknown>);
        const out: string[] = [];
        for (const [k, v] of entries) out[Number(k)] = String(v);
        return Array.from(out, (v, i) => v ?? `LABEL_${i}`);
      }
    } catch {
      // fall through to `labels`
    }
  }
  const labels = metadata["labels"];
  return labels === undefined ? null : labels.split(",").map((l) => l.trim());
}
