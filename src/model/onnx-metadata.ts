/**
 * Reads what Sluice needs from an ONNX file without decoding tensors: `ModelProto.metadata_props`
 * (field 14: StringStringEntryProto {key=1, value=2}) and the op types of the main graph
 * (ModelProto.graph=7 → GraphProto.node=1 → NodeProto.op_type=4). A protobuf wire-format scan that
 * skips the large initializers. onnxruntime-node exposes neither, and protobufjs is only a dev dependency.
 * Field numbers: https://github.com/onnx/onnx/blob/main/onnx/onnx.proto3
 */
export interface OnnxSummary {
  metadata: Record<string, string>;
  opTypes: Set<string>;
}

const decoder = new TextDecoder();

export function readOnnxSummary(bytes: Uint8Array): OnnxSummary {
  const summary: OnnxSummary = { metadata: {}, opTypes: new Set() };
  scanFields(bytes, 0, bytes.length, (field, start, end) => {
    if (field === 14) {
      let key = "";
      let value = "";
      scanFields(bytes, start, end, (f, s, e) => {
        if (f === 1) key = decoder.decode(bytes.subarray(s, e));
        else if (f === 2) value = decoder.decode(bytes.subarray(s, e));
      });
      summary.metadata[key] = value;
    } else if (field === 7) {
      scanFields(bytes, start, end, (graphField, s, e) => {
        if (graphField !== 1) return;
        scanFields(bytes, s, e, (nodeField, ns, ne) => {
          if (nodeField === 4) summary.opTypes.add(decoder.decode(bytes.subarray(ns, ne)));
        });
      });
    }
  });
  return summary;
}

/** Calls `onBytes(field, start, end)` for each length-delimited field in [from, to); skips the rest. */
function scanFields(
  bytes: Uint8Array,
  from: number,
  to: number,
  onBytes: (field: number, start: number, end: number) => void,
): void {
  let pos = from;
  const varint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (pos >= to) throw new Error("not an ONNX model: truncated protobuf varint");
      const b = bytes[pos++]!;
      // Multiply, not shift: values can exceed 2^31.
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
    }
  };
  while (pos < to) {
    const tag = varint();
    const wireType = tag % 8;
    const field = Math.floor(tag / 8);
    if (wireType === 0) varint();
    else if (wireType === 1) pos += 8;
    else if (wireType === 5) pos += 4;
    else if (wireType === 2) {
      const len = varint();
      const start = pos;
      pos += len;
      if (pos > to) throw new Error("not an ONNX model: field runs past the end");
      onBytes(field, start, pos);
    } else throw new Error(`not an ONNX model: unsupported protobuf wire type ${wireType}`);
  }
}
