import type { InferenceOutput } from "../contracts/inference.js";

/**
 * How far the candidate's answer is from the online model's for one request (docs/model-upgrades.md,
 * "Shadow scoring"), where that means something:
 * - `label`: 1 when both classifiers chose the same label, else 0 (its mean is the agreement rate);
 * - `cosine`: cosine similarity of the two embeddings, only when both have the same dimensions;
 * - `max_abs_diff`: the largest absolute difference of any element of same-named, same-shaped output
 *   tensors.
 * Undefined when the outputs are not comparable (another task, other dimensions, other tensors).
 */
export type AgreementMeasure = "label" | "cosine" | "max_abs_diff";

export function agreement(
  online: InferenceOutput,
  candidate: InferenceOutput,
): { measure: AgreementMeasure; value: number } | undefined {
  if (online.label !== undefined && candidate.label !== undefined)
    return { measure: "label", value: online.label === candidate.label ? 1 : 0 };
  if (online.embedding !== undefined && candidate.embedding !== undefined) {
    const a = online.embedding;
    const b = candidate.embedding;
    if (a.length !== b.length || a.length === 0) return undefined;
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) {
      dot += (a[i] as number) * (b[i] as number);
      na += (a[i] as number) ** 2;
      nb += (b[i] as number) ** 2;
    }
    if (na === 0 || nb === 0) return undefined;
    return { measure: "cosine", value: dot / Math.sqrt(na * nb) };
  }
  if ("tensors" in online && "tensors" in candidate && online.tensors && candidate.tensors) {
    let max: number | undefined;
    for (const t of online.tensors) {
      const other = candidate.tensors.find((c) => c.name === t.name);
      if (!other || other.shape.join(",") !== t.shape.join(",")) continue;
      const x = t.data as ArrayLike<unknown>;
      const y = other.data as ArrayLike<unknown>;
      for (let i = 0; i < x.length; i++) {
        if (typeof x[i] !== "number" || typeof y[i] !== "number") continue;
        const d = Math.abs((x[i] as number) - (y[i] as number));
        max = max === undefined ? d : Math.max(max, d);
      }
    }
    return max === undefined ? undefined : { measure: "max_abs_diff", value: max };
  }
  return undefined;
}

/**
 * Whether request `id` is shadowed at `share` (0..1): FNV-1a of the id, so a retry (the same id)
 * is shadowed or not exactly like the first attempt, on every instance. Pure.
 */
export function isShadowed(id: string, share: number): boolean {
  if (share <= 0) return false;
  if (share >= 1) return true;
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h / 0x100000000 < share;
}
