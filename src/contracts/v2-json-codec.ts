import { headerValue, type RecordHeaders } from "./codec.js";
import {
  type DecodeOutcome,
  describe,
  fail,
  truncateForMessage,
  validateDeadline,
} from "./decode-outcome.js";
import type { InferenceOutput, InferenceRequest, InferenceResult } from "./inference.js";
import {
  elementCount,
  type NamedTensor,
  TENSOR_DATATYPES,
  type TensorData,
  type TensorDatatype,
} from "./tensor.js";

/**
 * The Open Inference Protocol (KServe V2) JSON on Kafka, as MLServer's Kafka server and Seldon Core 2
 * carry it (docs/contracts.md, "V2 JSON"). `topics.requestCodec: v2-json` / `topics.resultCodec: v2-json`.
 *
 * Request `{id?, parameters?, inputs: [{name, shape, datatype, data, parameters?}], outputs?: [{name}]}`:
 * - the id is `id`, else the `x-request-id` header (Seldon keeps it through a pipeline); neither is
 *   MISSING_ID. It is the dedup key like a JSON request's id;
 * - `data` may be flat or nested (row-major); its element count must equal the product of `shape`;
 * - `parameters.deadline_ms` (epoch ms) is the request's deadline;
 * - a request with one BYTES input of one element also carries that string as `text`, so text models
 *   accept V2 requests (as MLServer's HuggingFace runtime does).
 * Structural problems are SCHEMA_VIOLATION (stage validate); whether the tensors fit the model is
 * checked against the model's signature later (src/model/tensor-signature.ts).
 *
 * Response `{model_name, model_version, id, parameters, outputs}`: Sluice's status, error, fallback,
 * source and timing fields are flat scalar `parameters` (the protocol's parameter values are scalars);
 * the `x-request-id` header carries the id.
 */
export const REQUEST_ID_HEADER = "x-request-id";
/** MLServer's Kafka server routes a request to a model by this header. */
export const MLSERVER_MODEL_HEADER = "mlserver-model";

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

/**
 * `servedModel`: the model this group serves (`model.name`). A request whose `mlserver-model` header
 * names another model is MODEL_MISMATCH rather than answered by the wrong model (a topic that
 * multiplexed several MLServer models); without the header, or without `servedModel`, any request goes.
 */
export function decodeV2Request(value: Buffer, headers?: RecordHeaders, servedModel?: string): DecodeOutcome {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString("utf8"));
  } catch {
    return fail(
      "DECODE_FAILED",
      `value is not valid JSON (${value.length} bytes); expected a V2 inference request`,
    );
  }
  if (!isObject(parsed)) {
    return fail(
      "SCHEMA_VIOLATION",
      `value is JSON ${describe(parsed)}; expected a V2 inference request object`,
    );
  }
  const named = headerValue(headers, MLSERVER_MODEL_HEADER);
  if (servedModel !== undefined && named !== undefined && named !== servedModel) {
    return fail(
      "MODEL_MISMATCH",
      `request names model "${truncateForMessage(named)}" in its ${MLSERVER_MODEL_HEADER} header, but this group serves "${truncateForMessage(servedModel)}" (model.name): send that model's requests to its own topic and group, or set model.name to "${truncateForMessage(named)}" if it is this model`,
    );
  }
  const id = parsed.id ?? headerValue(headers, REQUEST_ID_HEADER);
  if (id === undefined || id === null || id === "") {
    return fail(
      "MISSING_ID",
      `V2 request has no "id" and no ${REQUEST_ID_HEADER} header; set one of them (also use it as the record key)`,
    );
  }
  if (typeof id !== "string") return fail("SCHEMA_VIOLATION", `"id" is ${describe(id)}; expected a string`);
  const parameters = parsed.parameters ?? {};
  if (!isObject(parameters)) {
    return fail("SCHEMA_VIOLATION", `"parameters" is ${describe(parameters)}; expected an object`);
  }
  const deadlineProblem = validateDeadline(parameters.deadline_ms, "parameters.deadline_ms");
  if (deadlineProblem !== undefined) return deadlineProblem;
  const inputs = parsed.inputs;
  if (!Array.isArray(inputs) || inputs.length === 0) {
    return fail("SCHEMA_VIOLATION", `"inputs" is ${describe(inputs)}; expected a non-empty array of tensors`);
  }
  const tensors: NamedTensor[] = [];
  for (let i = 0; i < inputs.length; i++) {
    const t = parseTensor(inputs[i], i);
    if (typeof t === "string") return fail("SCHEMA_VIOLATION", t);
    if (tensors.some((x) => x.name === t.name)) {
      return fail("SCHEMA_VIOLATION", `inputs[${i}]: input "${truncateForMessage(t.name)}" is given twice`);
    }
    tensors.push(t);
  }
  const outputs = parseRequestedOutputs(parsed.outputs);
  if (typeof outputs === "string") return fail("SCHEMA_VIOLATION", outputs);
  const only = tensors.length === 1 ? tensors[0] : undefined;
  const text = only?.datatype === "BYTES" && only.data.length === 1 ? (only.data[0] as string) : "";
  const request: InferenceRequest = {
    id,
    text,
    deadlineMs: (parameters.deadline_ms as number | undefined) ?? null,
    attributes: null,
    tensors: { inputs: tensors, outputs },
  };
  return { ok: true, request };
}

/**
 * A request as V2 JSON (backfill submission, tests, the demo, `encodeRequest(…, "v2-json")`): its
 * tensors when it has them, else its text as one BYTES input.
 */
export function encodeV2Request(req: InferenceRequest): { value: Buffer; headers: Record<string, string> } {
  const inputs = req.tensors?.inputs ?? [{ name: "text", shape: [1], datatype: "BYTES", data: [req.text] }];
  const body = {
    id: req.id,
    ...(req.deadlineMs ? { parameters: { deadline_ms: req.deadlineMs } } : {}),
    inputs,
    ...(req.tensors?.outputs ? { outputs: req.tensors.outputs.map((name) => ({ name })) } : {}),
  };
  return {
    value: Buffer.from(JSON.stringify(body), "utf8"),
    headers: { "content-type": "application/json", [REQUEST_ID_HEADER]: req.id },
  };
}

export interface V2ResponseTensor {
  name: string;
  datatype: TensorDatatype;
  shape: number[];
  data: TensorData;
  parameters?: Record<string, string | number | boolean>;
}

export interface V2InferenceResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, string | number | boolean>;
  outputs: V2ResponseTensor[];
}

export function encodeV2Result(result: InferenceResult): { value: Buffer; headers: Record<string, string> } {
  const parameters: Record<string, string | number | boolean> = {
    status: result.status,
    source_topic: result.source.topic,
    source_partition: result.source.partition,
    source_offset: result.source.offset,
    request_timestamp: result.timing.requestTimestamp,
    queue_ms: result.timing.queueMs,
    inference_ms: result.timing.inferenceMs,
    batch_size: result.timing.batchSize,
    completed_at: result.timing.completedAt,
    truncated: result.truncated ?? false,
  };
  if (result.error) {
    parameters.error_code = result.error.code;
    parameters.error_message = result.error.message;
  }
  if (result.fallbackReason) parameters.fallback_reason = result.fallbackReason;
  if (result.runId) parameters.run_id = result.runId;
  if (result.attributes) parameters.attributes = JSON.stringify(result.attributes);
  const response: V2InferenceResponse = {
    model_name: result.model.name,
    model_version: result.model.version,
    id: result.id,
    parameters,
    outputs: v2Outputs(result.output),
  };
  return {
    value: Buffer.from(JSON.stringify(response), "utf8"),
    headers: { "content-type": "application/json", [REQUEST_ID_HEADER]: result.id },
  };
}

/** Parses a V2 inference response (downstream readers and tests). Throws an Error naming the problem. */
export function decodeV2Response(value: Buffer): V2InferenceResponse {
  const parsed = JSON.parse(value.toString("utf8")) as unknown;
  if (!isObject(parsed) || typeof parsed.id !== "string" || !Array.isArray(parsed.outputs)) {
    throw new Error('decodeV2Response: expected an object with a string "id" and an "outputs" array');
  }
  return parsed as unknown as V2InferenceResponse;
}

/** Text outputs as V2 tensors: `embedding` FP32 [1, dim]; `label` BYTES [1] and `scores` FP32 [1, classes]. */
function v2Outputs(output: InferenceOutput | null): V2ResponseTensor[] {
  if (output === null) return [];
  if ("tensors" in output && output.tensors !== undefined) return output.tensors;
  if (output.embedding !== undefined) {
    const data = Array.from(output.embedding);
    return [{ name: "embedding", datatype: "FP32", shape: [1, data.length], data }];
  }
  const scores = output.scores ?? {};
  const labels = Object.keys(scores);
  return [
    { name: "label", datatype: "BYTES", shape: [1], data: [output.label ?? ""] },
    {
      name: "scores",
      datatype: "FP32",
      shape: [1, labels.length],
      data: labels.map((l) => scores[l] as number),
      parameters: { labels: JSON.stringify(labels) },
    },
  ];
}

/** `index`: the tensor's place in `inputs`, for messages (built only for a message). */
function parseTensor(raw: unknown, index: number): NamedTensor | string {
  if (!isObject(raw)) return `inputs[${index}] is ${describe(raw)}; expected {name, shape, datatype, data}`;
  const { name, shape, datatype, data } = raw;
  if (typeof name !== "string" || name === "")
    return `inputs[${index}].name is ${describe(name)}; expected a non-empty string`;
  // Built only for a message: most tensors are valid.
  const label = () => `input "${truncateForMessage(name)}"`;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
    return `${label()}: "shape" must be an array of non-negative integers`;
  }
  if (typeof datatype !== "string" || !(TENSOR_DATATYPES as readonly string[]).includes(datatype)) {
    return `${label()}: datatype ${typeof datatype === "string" ? `"${truncateForMessage(datatype)}"` : describe(datatype)} is not supported; expected one of ${TENSOR_DATATYPES.join(", ")}`;
  }
  if (!Array.isArray(data))
    return `${label()}: "data" is ${describe(data)}; expected an array (flat or nested, row-major)`;
  // Flat data (the usual form) is taken as it is; nested data is flattened, row-major.
  const flat = data.some(Array.isArray) ? (data.flat(Number.POSITIVE_INFINITY) as unknown[]) : data;
  const dims = shape as number[];
  const expected = elementCount(dims);
  if (flat.length !== expected) {
    return `${label()}: "data" has ${flat.length} elements but shape [${dims.join(",")}] holds ${expected}`;
  }
  const problem = checkElements(flat, datatype as TensorDatatype);
  if (problem !== undefined) return `${label()}: ${problem}`;
  return { name, datatype: datatype as TensorDatatype, shape: dims, data: flat as TensorData };
}

/** Whether every element fits the datatype; the first misfit is named by index, never by value. */
function checkElements(flat: unknown[], datatype: TensorDatatype): string | undefined {
  const bad = (i: number, expected: string) =>
    `element ${i} is ${describe(flat[i])}; ${datatype} expects ${expected}`;
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    switch (datatype) {
      case "BYTES":
        if (typeof v !== "string") return bad(i, "strings");
        break;
      case "BOOL":
        if (typeof v !== "boolean") return bad(i, "true or false");
        break;
      case "FP32":
      case "FP64":
        if (typeof v !== "number") return bad(i, "numbers");
        break;
      case "INT32":
        if (!Number.isInteger(v) || (v as number) < INT32_MIN || (v as number) > INT32_MAX)
          return bad(i, "32-bit integers");
        break;
      case "INT64":
        if (!Number.isSafeInteger(v)) return bad(i, "integers within ±2^53 (JSON numbers)");
        break;
    }
  }
  return undefined;
}

function parseRequestedOutputs(raw: unknown): string[] | null | string {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) return `"outputs" is ${describe(raw)}; expected an array of {name}`;
  const names: string[] = [];
  for (let i = 0; i < raw.length; i++) {
    const o = raw[i] as unknown;
    if (!isObject(o) || typeof o.name !== "string" || o.name === "") {
      return `outputs[${i}] needs a non-empty string "name"`;
    }
    names.push(o.name);
  }
  return names.length === 0 ? null : names;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
