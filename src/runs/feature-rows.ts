import type { TensorInputs } from "../contracts/tensor.js";
import { decodeV2Request, REQUEST_ID_HEADER } from "../contracts/v2-json-codec.js";

/**
 * Tensor rows of a batch file for `model.task: tensor`: named feature columns (`--features a,b,c`)
 * become one FP32 input `[1, features]` named `--feature-input`; a JSONL line that is a V2 inference
 * request (it has an `inputs` array) is read with the V2 codec. A value that is not a number is a row
 * failure (SCHEMA_VIOLATION), never a stopped run.
 */
export interface FeatureColumns {
  columns: string[];
  /** The model input the columns feed (`sluice model info` lists them). */
  input: string;
}

export type FeatureRow = { ok: true; tensors: TensorInputs } | { ok: false; code: string; message: string };

/** `values[i]` is column i's raw value (a CSV string or a JSON value). */
export function featureTensor(features: FeatureColumns, values: readonly unknown[], row: number): FeatureRow {
  const data: number[] = [];
  for (let i = 0; i < features.columns.length; i++) {
    const raw = values[i];
    const v =
      typeof raw === "number" ? raw : typeof raw === "string" && raw.trim() !== "" ? Number(raw) : Number.NaN;
    if (!Number.isFinite(v)) {
      return {
        ok: false,
        code: "SCHEMA_VIOLATION",
        message: `row ${row}: feature "${features.columns[i]}" is not a finite number`,
      };
    }
    data.push(v);
  }
  return {
    ok: true,
    tensors: {
      inputs: [{ name: features.input, datatype: "FP32", shape: [1, data.length], data }],
      outputs: null,
    },
  };
}

/** Whether a parsed JSONL object is a V2 inference request. */
export function isV2Request(obj: Record<string, unknown>): boolean {
  return Array.isArray(obj.inputs);
}

/** A V2 request line: its `id`, else the row's id field, names it. */
export function v2RequestRow(line: string, fallbackId: string, row: number): FeatureRow & { id?: string } {
  const decoded = decodeV2Request(
    Buffer.from(line, "utf8"),
    fallbackId ? { [REQUEST_ID_HEADER]: fallbackId } : {},
  );
  if (!decoded.ok) return { ok: false, code: decoded.code, message: `row ${row}: ${decoded.message}` };
  return { ok: true, id: decoded.request.id, tensors: decoded.request.tensors as TensorInputs };
}
