import { deflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { readZipEntry } from "../../../src/model/jar-entry-reader.js";
import { NoopModel } from "../../../src/model/noop-model.js";
import { readOnnxSummary } from "../../../src/model/onnx-metadata.js";
import { buildTinyModelBytes } from "../../support/tiny-onnx.js";

/** Minimal zip writer (local headers + central directory + EOCD), enough to exercise the reader. */
function zip(entries: { name: string; data: Buffer; deflate: boolean }[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name);
    const body = e.deflate ? deflateRawSync(e.data) : e.data;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(e.deflate ? 8 : 0, 8);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(e.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(e.deflate ? 8 : 0, 10);
    central.writeUInt32LE(body.length, 20);
    central.writeUInt32LE(e.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, body);
    centrals.push(central, name);
    offset += 30 + name.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(entries.length, 8);
  eocd.writeUInt16LE(entries.length, 10);
  eocd.writeUInt32LE(cd.length, 12);
  eocd.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, eocd]);
}

describe("readZipEntry (fallback when unzip is missing)", () => {
  const text = Buffer.from("hello model ".repeat(100));
  const archive = zip([
    { name: "META-INF/MANIFEST.MF", data: Buffer.from("x"), deflate: false },
    { name: "model.onnx", data: text, deflate: true },
    { name: "plain.txt", data: Buffer.from("stored"), deflate: false },
  ]);
  it("reads deflated and stored entries", () => {
    expect(readZipEntry(archive, "model.onnx").equals(text)).toBe(true);
    expect(readZipEntry(archive, "plain.txt").toString()).toBe("stored");
  });
  it("explains a missing entry or a non-zip", () => {
    expect(() => readZipEntry(archive, "nope")).toThrow(/no entry nope/);
    expect(() => readZipEntry(Buffer.alloc(100), "x")).toThrow(/not a zip/);
  });
});

describe("readOnnxSummary", () => {
  it("reads metadata_props and op types without decoding tensors", () => {
    const s = readOnnxSummary(buildTinyModelBytes({ task: "classification", labelsInMetadata: true }));
    expect(JSON.parse(s.metadata["id2label"]!)).toEqual({ 0: "negative", 1: "neutral", 2: "positive" });
    expect([...s.opTypes].sort()).toEqual([
      "Add",
      "Cast",
      "Div",
      "Gather",
      "MatMul",
      "Mul",
      "ReduceSum",
      "Unsqueeze",
    ]);
    expect(s.opTypes.has("DynamicQuantizeLinear")).toBe(false);
  });
  it("rejects bytes that are not protobuf", () => {
    expect(() => readOnnxSummary(Buffer.from('{"model": "json"}'))).toThrow(/not an ONNX model/);
  });
});

describe("NoopModel", () => {
  it("returns fixed-size zero embeddings and validates items", async () => {
    const m = new NoopModel({ dimensions: 8 });
    const { outcomes } = await m.run(["two words", "", 3]);
    expect(outcomes[0]).toEqual({
      ok: true,
      output: { embedding: new Array(8).fill(0) },
      tokens: 4,
      truncated: false,
    });
    expect(outcomes.slice(1).map((o) => (o.ok ? "ok" : o.code))).toEqual(["EMPTY_TEXT", "INVALID_TEXT"]);
    expect(m.identity).toEqual({ name: "noop", version: "noop" });
  });
});
