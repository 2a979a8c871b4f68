/**
 * The protobuf wire format, as little of it as Sluice's ONNX scans and edits need (onnx-metadata.ts
 * reads, zipmap-unwrap.ts rewrites): a field list of one message with byte ranges, varints, and
 * length-delimited encoding. Untouched fields are copied as the byte ranges they came in, so an edit
 * re-encodes only the submessages it changes. protobufjs is only a dev dependency, and onnxruntime-node
 * exposes no graph.
 * Wire format: https://protobuf.dev/programming-guides/encoding/
 */
export interface WireField {
  field: number;
  /** 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32. */
  wireType: number;
  /** Where the field begins (its tag): `bytes.subarray(tagStart, end)` is the field as it came. */
  tagStart: number;
  /** The value: for wire type 2 the payload after the length, else the value's bytes. */
  start: number;
  end: number;
}

/** The fields of the message in `bytes[from, to)`, in order. Throws on a malformed message. */
export function readFields(bytes: Uint8Array, from = 0, to = bytes.length): WireField[] {
  const fields: WireField[] = [];
  let pos = from;
  while (pos < to) {
    const tagStart = pos;
    const tag = readVarint(bytes, pos, to);
    pos = tag.next;
    const wireType = Number(tag.value % 8n);
    const field = Number(tag.value / 8n);
    let start = pos;
    if (wireType === 0) pos = readVarint(bytes, pos, to).next;
    else if (wireType === 1) pos += 8;
    else if (wireType === 5) pos += 4;
    else if (wireType === 2) {
      const len = readVarint(bytes, pos, to);
      start = len.next;
      pos = start + Number(len.value);
    } else throw new Error(`not an ONNX model: unsupported protobuf wire type ${wireType}`);
    if (pos > to) throw new Error("not an ONNX model: field runs past the end");
    fields.push({ field, wireType, tagStart, start, end: pos });
  }
  return fields;
}

/** An unsigned varint at `pos` (as protobuf writes int64: a negative value is its two's complement). */
export function readVarint(
  bytes: Uint8Array,
  pos: number,
  to = bytes.length,
): { value: bigint; next: number } {
  let value = 0n;
  let shift = 0n;
  for (;;) {
    if (pos >= to) throw new Error("not an ONNX model: truncated protobuf varint");
    const b = bytes[pos++]!;
    value |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return { value, next: pos };
    shift += 7n;
  }
}

/** The varints of a repeated integer field's entry: one value (unpacked) or several (packed). */
export function readVarints(bytes: Uint8Array, f: WireField): bigint[] {
  if (f.wireType === 0) return [readVarint(bytes, f.start, f.end).value];
  const out: bigint[] = [];
  for (let pos = f.start; pos < f.end; ) {
    const v = readVarint(bytes, pos, f.end);
    out.push(v.value);
    pos = v.next;
  }
  return out;
}

/** int64 as protobuf stores it (two's complement in 64 bits) → a JS number. */
export function toInt64(v: bigint): number {
  return Number(BigInt.asIntN(64, v));
}

export function encodeVarint(value: number | bigint): Uint8Array {
  let v = BigInt.asUintN(64, BigInt(value));
  const out: number[] = [];
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v === 0n ? low : low | 0x80);
  } while (v !== 0n);
  return Uint8Array.from(out);
}

/** A length-delimited field (string, bytes or submessage) with its tag. */
export function lengthDelimited(field: number, payload: Uint8Array): Uint8Array {
  return concatBytes([encodeVarint(field * 8 + 2), encodeVarint(payload.length), payload]);
}

/** A varint field with its tag. */
export function varintField(field: number, value: number | bigint): Uint8Array {
  return concatBytes([encodeVarint(field * 8), encodeVarint(value)]);
}

const encoder = new TextEncoder();

export function stringField(field: number, value: string): Uint8Array {
  return lengthDelimited(field, encoder.encode(value));
}

export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
