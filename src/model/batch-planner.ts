/**
 * How one formed batch becomes ONNX Runtime calls. Padding to the longest item wastes compute on every
 * shorter item, so with bucketing the items are sorted by token length and cut into length-homogeneous
 * sub-batches; outputs are written back by original index, so order never changes. Sorting alone inside
 * one padded call would change nothing: the padded shape is the same.
 */
export interface SubBatch {
  /** Original positions (in the batch) of the items in this sub-batch. */
  indices: number[];
  /** Padded sequence length: the longest item of the sub-batch. */
  seqLen: number;
  realTokens: number;
}

/**
 * A new sub-batch starts when adding the next (longer) item would push real ÷ padded tokens below this.
 * 0.8 keeps waste ≤ 20 % while still grouping similar lengths; see docs/model-runner.md for measurements.
 */
export const DEFAULT_MIN_PADDING_EFFICIENCY = 0.8;

export function planSubBatches(
  lengths: readonly number[],
  bucketing: boolean,
  minPaddingEfficiency = DEFAULT_MIN_PADDING_EFFICIENCY,
): SubBatch[] {
  if (lengths.length === 0) return [];
  if (!bucketing) {
    let real = 0;
    let max = 0;
    for (const l of lengths) {
      real += l;
      if (l > max) max = l;
    }
    return [{ indices: lengths.map((_, i) => i), seqLen: max, realTokens: real }];
  }
  // Stable sort by length (ties keep input order) so plans are deterministic.
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const out: SubBatch[] = [];
  let current: SubBatch | null = null;
  for (const index of order) {
    const len = lengths[index]!;
    if (current !== null) {
      const real = current.realTokens + len;
      const padded = len * (current.indices.length + 1);
      if (real / padded >= minPaddingEfficiency) {
        current.indices.push(index);
        current.realTokens = real;
        current.seqLen = len;
        continue;
      }
    }
    current = { indices: [index], seqLen: len, realTokens: len };
    out.push(current);
  }
  return out;
}

export interface PaddedInputs {
  inputIds: BigInt64Array;
  attentionMask: BigInt64Array;
}

/** Row-major [rows, seqLen] int64 tensors, right-padded with id 0 and mask 0. */
export function padSequences(sequences: readonly Int32Array[], seqLen: number): PaddedInputs {
  const inputIds = new BigInt64Array(sequences.length * seqLen);
  const attentionMask = new BigInt64Array(sequences.length * seqLen);
  sequences.forEach((ids, row) => {
    const base = row * seqLen;
    for (let i = 0; i < ids.length; i++) {
      inputIds[base + i] = BigInt(ids[i]!);
      attentionMask[base + i] = 1n;
    }
  });
  return { inputIds, attentionMask };
}

/**
 * Cuts sub-batches into slices of at most `maxRows` rows (or `maxRows(seqLen)` for a sub-batch
 * padded to `seqLen`, at least 1), each padded to its own longest item: the backfill lane's ORT calls
 * stay short, so an online call waits for at most one slice per worker (docs/lanes.md).
 */
export function sliceSubBatches(
  plan: readonly SubBatch[],
  lengths: readonly number[],
  maxRows: number | ((seqLen: number) => number),
): SubBatch[] {
  const out: SubBatch[] = [];
  for (const sub of plan) {
    const rows = Math.max(1, Math.floor(typeof maxRows === "number" ? maxRows : maxRows(sub.seqLen)));
    for (let start = 0; start < sub.indices.length; start += rows) {
      const indices = sub.indices.slice(start, start + rows);
      let seqLen = 0;
      let realTokens = 0;
      for (const i of indices) {
        const l = lengths[i] ?? 0;
        realTokens += l;
        if (l > seqLen) seqLen = l;
      }
      out.push({ indices, seqLen, realTokens });
    }
  }
  return out;
}
