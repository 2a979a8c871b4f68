/**
 * Tensor request and result contracts (issue 20), beside the text ones in inference.ts. Datatypes are
 * the Open Inference Protocol's (KServe V2) names; `data` is always flat and row-major here, whatever
 * nesting the wire had. The first dimension of `shape` is the batch (row) dimension.
 */
export type TensorDatatype = "BOOL" | "INT32" | "INT64" | "FP32" | "FP64" | "BYTES";

export const TENSOR_DATATYPES: readonly TensorDatatype[] = [
  "BOOL",
  "INT32",
  "INT64",
  "FP32",
  "FP64",
  "BYTES",
];

export type TensorData = number[] | string[] | boolean[];

export interface NamedTensor {
  name: string;
  datatype: TensorDatatype;
  shape: number[];
  /** Flat, row-major; its length is the product of `shape`. */
  data: TensorData;
  /**
   * V2 tensor parameters of an output (scalars): `labels`, a JSON array of class labels in column
   * order, on a ZipMap's probabilities. Request parameters are not kept.
   */
  parameters?: Record<string, string | number | boolean>;
}

/** What a tensor request asks the model for: named inputs and, optionally, which outputs to return. */
export interface TensorInputs {
  inputs: NamedTensor[];
  /** Output names the request asked for (V2 `outputs[].name`); null = all of the model's outputs. */
  outputs: string[] | null;
}

/** A tensor model's answer for one request: its rows of every requested output. */
export interface TensorOutput {
  tensors: NamedTensor[];
}

/** Number of elements a shape holds. */
export function elementCount(shape: readonly number[]): number {
  return shape.reduce((n, d) => n * d, 1);
}
