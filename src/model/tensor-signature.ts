import type { NamedTensor, TensorDatatype, TensorInputs } from "../contracts/tensor.js";
import { SluiceError } from "../sluice-error.js";
import type { TensorValidationCode, TensorValidationFailure } from "./model-port.js";
import type { FeedElementType, TensorInfo } from "./worker-protocol.js";

/**
 * A tensor model's signature, read from its ONNX graph (through onnxruntime's input/output
 * metadata): input and output names, element types and shapes. The first dimension is the batch
 * (row) dimension: dynamic (a symbolic name or -1) or fixed. `check` validates one request against
 * it before any ORT call, so a tensor that does not fit is a dead letter with a named code, never an
 * ORT error that fails its neighbours.
 */
export interface SignatureTensor {
  name: string;
  datatype: TensorDatatype;
  elementType: FeedElementType;
  /** null = dynamic. */
  dims: (number | null)[];
  /**
   * Class labels of the columns, for an output unwrapped from a ZipMap (zipmap-unwrap.ts); the V2
   * response carries them as the output's `parameters.labels`.
   */
  labels?: string[] | number[];
}

export interface TensorSignature {
  inputs: SignatureTensor[];
  /** Tensor outputs, fetched from every call. */
  outputs: SignatureTensor[];
  /**
   * Outputs that are still sequences or maps (a ZipMap is unwrapped into a tensor at load, see
   * zipmap-unwrap.ts): onnxruntime-node cannot return them; never fetched.
   */
  skippedOutputs: string[];
}

const V2_OF: Record<string, TensorDatatype> = {
  float32: "FP32",
  float64: "FP64",
  int32: "INT32",
  int64: "INT64",
  bool: "BOOL",
  string: "BYTES",
};

/** `labels`: class labels by output name (the ZipMaps unwrapped at load). */
export function readTensorSignature(
  inputs: readonly TensorInfo[],
  outputs: readonly TensorInfo[],
  modelPath: string,
  labels: ReadonlyMap<string, string[] | number[]> = new Map(),
): TensorSignature {
  const convert = (t: TensorInfo, what: string): SignatureTensor => {
    const datatype = V2_OF[t.type];
    if (datatype === undefined) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `model ${modelPath}: ${what} "${t.name}" has element type ${t.type}; model.task tensor supports float32, float64, int32, int64, bool and string`,
      );
    }
    const dims = t.shape.map((d) => (typeof d === "number" && d >= 0 ? d : null));
    const classLabels = labels.get(t.name);
    return {
      name: t.name,
      datatype,
      elementType: t.type as FeedElementType,
      dims,
      ...(classLabels === undefined ? {} : { labels: classLabels }),
    };
  };
  const tensorOutputs = outputs.filter((o) => o.type !== "non-tensor");
  if (tensorOutputs.length === 0) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `model ${modelPath} has no tensor outputs (only sequences or maps, which onnxruntime-node cannot return); export it with tensor outputs`,
    );
  }
  return {
    inputs: inputs.map((i) => convert(i, "input")),
    outputs: tensorOutputs.map((o) => convert(o, "output")),
    skippedOutputs: outputs.filter((o) => o.type === "non-tensor").map((o) => o.name),
  };
}

/** `[-1,4]` style, as shapes are shown in messages and dead-letter headers (-1 = dynamic). */
export function formatDims(dims: readonly (number | null)[]): string {
  return `[${dims.map((d) => (d === null ? -1 : d)).join(",")}]`;
}

export type CheckedRequest =
  | { ok: true; rows: number; inputs: NamedTensor[]; outputs: string[] }
  | TensorValidationFailure;

/**
 * Validates one request against the signature: every model input present and no other, datatypes
 * equal, shapes compatible (same rank, fixed dimensions equal, one row count across inputs), at most
 * `maxRows` rows, float values finite once converted (an FP32 value beyond ±3.4e38 becomes infinite),
 * requested outputs known. Inputs come back in the model's order.
 */
export function checkRequest(sig: TensorSignature, item: unknown, maxRows: number): CheckedRequest {
  if (!isTensorInputs(item)) {
    return reject(
      "TENSOR_REQUEST_REQUIRED",
      "model.task is tensor but the request carries no tensors; send a V2 inference request (topics.requestCodec v2-json)",
      {},
    );
  }
  // Loops, not a Map, closures or per-call arrays: this runs once per request at the ceiling.
  for (const t of item.inputs) {
    if (findNamed(sig.inputs, t.name) === undefined) {
      return reject(
        "TENSOR_INPUT_UNKNOWN",
        `input "${cut(t.name)}" is not an input of the model; its inputs are [${sig.inputs.map((i) => i.name).join(", ")}]`,
        { input: cut(t.name) },
      );
    }
  }
  let rows: number | undefined;
  const ordered: NamedTensor[] = [];
  for (const spec of sig.inputs) {
    const t = lastNamed(item.inputs, spec.name);
    if (t === undefined) {
      return reject(
        "TENSOR_INPUT_MISSING",
        `the request has no input "${spec.name}", which the model needs`,
        {
          input: spec.name,
          "expected-shape": formatDims(spec.dims),
          "expected-datatype": spec.datatype,
        },
      );
    }
    if (t.datatype !== spec.datatype) {
      return reject(
        "TENSOR_DATATYPE_MISMATCH",
        `input "${spec.name}" is ${t.datatype}; the model expects ${spec.datatype}`,
        { input: spec.name, "expected-datatype": spec.datatype, "actual-datatype": t.datatype },
      );
    }
    const fits =
      t.shape.length === spec.dims.length && fixedDimsEqual(spec.dims, t.shape) && (t.shape[0] ?? 0) > 0;
    if (!fits) {
      return reject(
        "TENSOR_SHAPE_MISMATCH",
        `input "${spec.name}" has shape ${formatDims(t.shape)}; the model expects ${formatDims(spec.dims)} (-1 = any size, at least one row)`,
        shapeContext(spec, t),
      );
    }
    const r = t.shape[0] as number;
    if (rows !== undefined && r !== rows) {
      return reject(
        "TENSOR_SHAPE_MISMATCH",
        `input "${spec.name}" has ${r} rows but an earlier input has ${rows}; every input needs the same row count`,
        shapeContext(spec, t),
      );
    }
    rows = r;
    if (r > maxRows) {
      return reject(
        "TENSOR_TOO_MANY_ROWS",
        `the request has ${r} rows, above batching.maxBatchSize=${maxRows}; split it or raise the limit`,
        { input: spec.name, "actual-shape": formatDims(t.shape), "max-rows": String(maxRows) },
      );
    }
    if (spec.datatype === "FP32" || spec.datatype === "FP64") {
      const data = t.data as number[];
      const narrow = spec.datatype === "FP32";
      const at = firstNonFinite(data, narrow);
      if (at >= 0) {
        return reject(
          "TENSOR_NON_FINITE",
          `input "${spec.name}" element ${at} is not a finite ${spec.datatype} value (NaN, infinite or out of range); the model forbids non-finite inputs`,
          { ...shapeContext(spec, t), "element-index": String(at) },
        );
      }
    }
    ordered.push(t);
  }
  for (const name of item.outputs ?? []) {
    if (findNamed(sig.outputs, name) === undefined) {
      return reject(
        "TENSOR_OUTPUT_UNKNOWN",
        `output "${cut(name)}" was requested but the model's outputs are [${outputNamesOf(sig).join(", ")}]`,
        { output: cut(name) },
      );
    }
  }
  return { ok: true, rows: rows as number, inputs: ordered, outputs: item.outputs ?? outputNamesOf(sig) };
}

/** The signature's output names, built once per signature (read-only: shared by every request). */
const outputNames = new WeakMap<TensorSignature, string[]>();
function outputNamesOf(sig: TensorSignature): string[] {
  let names = outputNames.get(sig);
  if (names === undefined) {
    names = sig.outputs.map((o) => o.name);
    outputNames.set(sig, names);
  }
  return names;
}

function findNamed<T extends { name: string }>(list: readonly T[], name: string): T | undefined {
  for (const t of list) if (t.name === name) return t;
  return undefined;
}

/** The last tensor of that name (a request naming an input twice: the later one counts). */
function lastNamed(list: readonly NamedTensor[], name: string): NamedTensor | undefined {
  for (let i = list.length - 1; i >= 0; i--) if ((list[i] as NamedTensor).name === name) return list[i];
  return undefined;
}

/** Fixed dimensions (non-null) equal the request's; the ranks are compared by the caller. */
function fixedDimsEqual(dims: readonly (number | null)[], shape: readonly number[]): boolean {
  for (let axis = 0; axis < dims.length; axis++) {
    const d = dims[axis];
    if (d !== null && d !== shape[axis]) return false;
  }
  return true;
}

/** The index of the first value that is not finite (as float32 when `narrow`), or -1. */
function firstNonFinite(data: readonly number[], narrow: boolean): number {
  for (let i = 0; i < data.length; i++) {
    const v = data[i] as number;
    if (!Number.isFinite(narrow ? Math.fround(v) : v)) return i;
  }
  return -1;
}

/** Built only for a rejection: most requests fit. */
function shapeContext(spec: SignatureTensor, t: NamedTensor): Record<string, string> {
  return { input: spec.name, "expected-shape": formatDims(spec.dims), "actual-shape": formatDims(t.shape) };
}

function reject(
  code: TensorValidationCode,
  message: string,
  context: Record<string, string>,
): CheckedRequest {
  return { ok: false, code, message, stage: "validate", context };
}

function isTensorInputs(item: unknown): item is TensorInputs {
  return item !== null && typeof item === "object" && Array.isArray((item as TensorInputs).inputs);
}

function cut(s: string): string {
  return s.length <= 120 ? s : `${s.slice(0, 120)}…`;
}
