import { readFields } from "./protobuf-wire.js";

/**
 * Reads what Sluice needs from an ONNX file without decoding tensors: `ModelProto.metadata_props`
 * (field 14: StringStringEntryProto {key=1, value=2}) and the op types of the main graph
 * (ModelProto.graph=7 → GraphProto.node=1 → NodeProto.op_type=4). A protobuf wire-format scan
 * (protobuf-wire.ts) that skips the large initializers; onnxruntime-node exposes neither.
 * Field numbers: https://github.com/onnx/onnx/blob/main/onnx/onnx.proto3
 */
export interface OnnxSummary {
  metadata: Record<string, string>;
  opTypes: Set<string>;
}

const decoder = new TextDecoder();

export function readOnnxSummary(bytes: Uint8Array): OnnxSummary {
  const summary: OnnxSummary = { metadata: {}, opTypes: new Set() };
  const text = (f: { start: number; end: number }) => decoder.decode(bytes.subarray(f.start, f.end));
  const submessage = (f: { wireType: number; start: number; end: number }) =>
    f.wireType === 2 ? readFields(bytes, f.start, f.end) : [];
  for (const top of readFields(bytes)) {
    if (top.wireType !== 2) continue;
    if (top.field === 14) {
      let key = "";
      let value = "";
      for (const f of submessage(top)) {
        if (f.field === 1) key = text(f);
        else if (f.field === 2) value = text(f);
      }
      summary.metadata[key] = value;
    } else if (top.field === 7) {
      for (const node of submessage(top)) {
        if (node.field !== 1) continue;
        for (const f of submessage(node)) if (f.field === 4) summary.opTypes.add(text(f));
      }
    }
  }
  return summary;
}
