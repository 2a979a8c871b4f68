import { elementCount, type NamedTensor, type TensorData } from "../contracts/tensor.js";
import type { SignatureTensor, TensorSignature } from "./tensor-signature.js";
import type { FeedData, WorkerFeed } from "./worker-protocol.js";

/**
 * Real batching for tensor models: the requests of a micro-batch are stacked along the batch (first)
 * dimension into one ORT call (a request may carry several rows), and each output is split back by
 * row ranges. Requests stack only when every input has the same non-batch dimensions.
 */
export interface RowRequest {
  /** Position in the runner's input list. */
  index: number;
  rows: number;
  /** In the model's input order (`checkRequest`). */
  inputs: NamedTensor[];
  outputs: string[];
}

/** Stackable groups, in first-seen order; `isolate` puts every request in its own group. */
export function stackGroups(requests: readonly RowRequest[], isolate: boolean): RowRequest[][] {
  if (isolate) return requests.map((r) => [r]);
  const groups = new Map<string, RowRequest[]>();
  for (const r of requests) {
    const key = stackKey(r.inputs);
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [r]);
    else group.push(r);
  }
  return [...groups.values()];
}

/** The inputs' non-batch dimensions, e.g. "4|3x2": requests stack when theirs are equal. */
function stackKey(inputs: readonly NamedTensor[]): string {
  let key = "";
  for (let i = 0; i < inputs.length; i++) {
    if (i > 0) key += "|";
    const shape = (inputs[i] as NamedTensor).shape;
    for (let axis = 1; axis < shape.length; axis++) key += axis > 1 ? `x${shape[axis]}` : `${shape[axis]}`;
  }
  return key;
}

/** One feed per model input: the group's rows one after another. */
export function stackFeeds(sig: TensorSignature, group: readonly RowRequest[]): WorkerFeed[] {
  const rows = group.reduce((n, r) => n + r.rows, 0);
  return sig.inputs.map((spec, i) => {
    const first = group[0]!.inputs[i]!;
    const values: unknown[] = [];
    for (const r of group) for (const v of r.inputs[i]!.data) values.push(v);
    return {
      name: spec.name,
      type: spec.elementType,
      dims: [rows, ...first.shape.slice(1)],
      data: toFeedData(spec, values),
    };
  });
}

/**
 * Each request's rows of every output it asked for, or a message when an output has no batch
 * dimension to split along (the caller then runs the requests one by one).
 */
export function splitOutputs(
  sig: TensorSignature,
  outputs: readonly WorkerFeed[],
  group: readonly RowRequest[],
): NamedTensor[][] | string {
  const rows = group.reduce((n, r) => n + r.rows, 0);
  const perRequest: NamedTensor[][] = group.map(() => []);
  for (const out of outputs) {
    const spec = sig.outputs.find((o) => o.name === out.name) as SignatureTensor;
    const data = fromFeedData(out.data);
    // A ZipMap's class labels, as the V2 response carries the scores' labels (docs/contracts.md).
    const labels = spec.labels === undefined ? {} : { parameters: { labels: JSON.stringify(spec.labels) } };
    if (group.length === 1) {
      perRequest[0]!.push({ name: out.name, datatype: spec.datatype, shape: [...out.dims], data, ...labels });
      continue;
    }
    if (out.dims[0] !== rows) {
      return `output "${out.name}" has shape [${out.dims.join(",")}], not ${rows} rows along its first dimension`;
    }
    const rest = out.dims.slice(1);
    const rowSize = elementCount(rest);
    let offset = 0;
    group.forEach((r, g) => {
      perRequest[g]!.push({
        name: out.name,
        datatype: spec.datatype,
        shape: [r.rows, ...rest],
        data: data.slice(offset * rowSize, (offset + r.rows) * rowSize) as TensorData,
        ...labels,
      });
      offset += r.rows;
    });
  }
  // Most requests ask for every output (checkRequest's default): no filtered copy then.
  return group.map((r, g) => {
    const mine = perRequest[g] as NamedTensor[];
    return mine.every((t) => r.outputs.includes(t.name))
      ? mine
      : mine.filter((t) => r.outputs.includes(t.name));
  });
}

function toFeedData(spec: SignatureTensor, values: unknown[]): FeedData {
  switch (spec.elementType) {
    case "float32":
      return Float32Array.from(values as number[]);
    case "float64":
      return Float64Array.from(values as number[]);
    case "int32":
      return Int32Array.from(values as number[]);
    case "int64":
      return BigInt64Array.from(values as number[], (v) => BigInt(v));
    case "bool":
      return Uint8Array.from(values as boolean[], (v) => (v ? 1 : 0));
    case "string":
      return values as string[];
  }
}

/** ORT output data as JSON-ready values: int64 as numbers, bool as booleans. */
function fromFeedData(data: FeedData): TensorData {
  if (Array.isArray(data)) return data;
  if (data instanceof BigInt64Array) return Array.from(data, (v) => Number(v));
  if (data instanceof Uint8Array) return Array.from(data, (v) => v !== 0);
  return Array.from(data as Float32Array);
}
