import { describe, expect, it } from "vitest";
import { partFileName, partName, retryPartName } from "../../../src/runs/part-name.js";
import {
  canonicalJson,
  changedConfigKeys,
  hashConfig,
  type InputDescription,
  inputChange,
  sluiceBuild,
} from "../../../src/runs/run-provenance.js";

const file = (sha256: string, uri = "file:///in.jsonl"): InputDescription => ({
  kind: "file",
  uri,
  format: "jsonl",
  sha256,
  sizeBytes: 1,
  rows: 1,
});
const topic = (endOffset: string, to: string | null = null): InputDescription => ({
  kind: "kafka",
  uri: "kafka:t",
  topic: "t",
  ranges: [{ partition: 0, startOffset: "0", endOffset }],
  spec: { from: null, to },
  rows: null,
});

describe("run provenance", () => {
  it("hashes configs by canonical JSON: key order does not matter, and existing hashes stay valid", () => {
    expect(canonicalJson({ b: { c: [1, 2] }, a: 1, skipped: undefined })).toBe('{"a":1,"b":{"c":[1,2]}}');
    // The SHA-256 of that canonical JSON: manifests written before stay resumable.
    expect(hashConfig({ b: { c: [1, 2] }, a: 1 })).toBe(
      "dd5af5bcb123ea514822a5c8bae89bf390153f34b6561ee3723ef4b6a92e79c4",
    );
  });

  it("names what changed between a recorded and a current input", () => {
    expect(inputChange(file("a"), file("a"))).toBeNull();
    expect(inputChange(file("a"), file("b"))).toBe("content");
    expect(inputChange(file("a"), file("a", "file:///other.jsonl"))).toBe("source");
    expect(inputChange(file("a"), topic("5"))).toBe("source");
    expect(inputChange(topic("5"), topic("5"))).toBeNull();
    expect(inputChange(topic("5"), topic("6"))).toBe("ranges");
    expect(inputChange(topic("5"), topic("5", "0:5"))).toBe("ranges");
  });

  it("lists the config keys whose values differ", () => {
    expect(changedConfigKeys({ a: 1, b: { x: 1 }, c: 3 }, { a: 1, b: { x: 2 }, d: 4 })).toEqual([
      "b",
      "c",
      "d",
    ]);
  });

  it("records the running Sluice's version", () => {
    expect(sluiceBuild().version).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe("part names", () => {
  it("are the part's index in five digits, retry rounds in two, shared by batch and export", () => {
    expect(partName(3)).toBe("part-00003");
    expect(retryPartName(1, 0)).toBe("retry-01-part-00000");
    expect(partFileName(partName(12), "avro")).toBe("part-00012.avro");
  });
});
