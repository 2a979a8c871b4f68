import { describe, expect, it } from "vitest";
import {
  buildDeadLetter,
  DEAD_LETTER_HEADERS,
  MAX_ERROR_MESSAGE_CHARS,
} from "../../../src/delivery/dead-letter.js";

const source = {
  topic: "requests",
  partition: 5,
  offset: "42",
  key: Buffer.from("req-1"),
  value: Buffer.from([0xde, 0xad, 0xbe, 0xef]),
  headers: { "content-type": "application/json", trace: [Buffer.from("a"), "b"] },
  timestamp: "1750000000000",
};

describe("buildDeadLetter", () => {
  it("keeps the raw key, value, headers and timestamp and adds error context headers", () => {
    const dl = buildDeadLetter(source, {
      code: "DECODE_FAILED",
      message: "value is not valid JSON",
      stage: "decode",
    });
    expect(dl.key).toBe(source.key);
    expect(dl.value).toBe(source.value);
    expect(dl.timestamp).toBe("1750000000000");
    expect(dl.headers).toEqual({
      "content-type": "application/json",
      trace: [Buffer.from("a"), "b"],
      "sluice.error.code": "DECODE_FAILED",
      "sluice.error.message": "value is not valid JSON",
      "sluice.error.stage": "decode",
      "sluice.error.topic": "requests",
      "sluice.error.partition": "5",
      "sluice.error.offset": "42",
    });
    const always = Object.values(DEAD_LETTER_HEADERS).filter((h) => h !== DEAD_LETTER_HEADERS.valueTruncated);
    expect(always.every((h) => h in dl.headers)).toBe(true);
    expect(DEAD_LETTER_HEADERS.valueTruncated in dl.headers).toBe(false);
  });

  it("cuts a value that would not fit maxBytes to its first bytes and records the original length", () => {
    const big = { ...source, value: Buffer.alloc(10_000, 0x41) };
    const error = { code: "DECODE_FAILED", message: "not JSON", stage: "decode" as const };
    const dl = buildDeadLetter(big, error, { maxBytes: 2000 });
    expect(dl.headers[DEAD_LETTER_HEADERS.valueTruncated]).toBe("10000");
    const value = dl.value as Buffer;
    expect(value.equals(big.value.subarray(0, value.length))).toBe(true);
    let headerBytes = 0;
    for (const [k, v] of Object.entries(dl.headers)) {
      headerBytes += k.length;
      for (const x of Array.isArray(v) ? v : [v]) headerBytes += Buffer.byteLength(x as string);
    }
    expect(big.key.length + value.length + headerBytes).toBeLessThanOrEqual(2000);
    expect(value.length).toBeGreaterThan(1500);
    // Fits already: untouched, no header.
    const small = buildDeadLetter(source, error, { maxBytes: 2000 });
    expect(small.value).toBe(source.value);
    expect(DEAD_LETTER_HEADERS.valueTruncated in small.headers).toBe(false);
  });

  it("handles null key and value (tombstones) and missing headers", () => {
    const dl = buildDeadLetter(
      { ...source, key: null, value: null, headers: undefined },
      { code: "DECODE_FAILED", message: "record has no value", stage: "decode" },
    );
    expect(dl.key).toBeNull();
    expect(dl.value).toBeNull();
    expect(dl.headers[DEAD_LETTER_HEADERS.stage]).toBe("decode");
  });

  it("replaces stale error headers of a replayed dead letter", () => {
    const replay = {
      ...source,
      headers: { "sluice.error.code": "OLD", "sluice.error.extra": "x", keep: "y" },
    };
    const dl = buildDeadLetter(replay, { code: "INFERENCE_FAILED", message: "ORT failed", stage: "model" });
    expect(dl.headers["sluice.error.code"]).toBe("INFERENCE_FAILED");
    expect(dl.headers["sluice.error.extra"]).toBeUndefined();
    expect(dl.headers.keep).toBe("y");
  });

  it("caps long messages", () => {
    const dl = buildDeadLetter(source, { code: "INTERNAL", message: "x".repeat(5000), stage: "deliver" });
    expect((dl.headers[DEAD_LETTER_HEADERS.message] as string).length).toBe(MAX_ERROR_MESSAGE_CHARS);
  });

  it("does not mutate the source headers", () => {
    const headers = { a: "1" };
    buildDeadLetter({ ...source, headers }, { code: "X", message: "m", stage: "validate" });
    expect(headers).toEqual({ a: "1" });
  });
});
