import { describe, expect, it } from "vitest";
import { TextTokenizer } from "../../../src/model/text-tokenizer.js";
import { tinyTokenIds, tinyTokenizerJson } from "../../support/tiny-onnx.js";

describe("TextTokenizer", () => {
  it("encodes with the tokenizer.json's template ([CLS] … [SEP])", () => {
    const t = new TextTokenizer(tinyTokenizerJson());
    const r = t.tokenize("The cat sat, zebra!");
    expect(r).toEqual({
      ok: true,
      ids: Int32Array.from(tinyTokenIds("The cat sat, zebra!")),
      truncated: false,
    });
  });

  it("truncates keeping the trailing special token, and applies the text prefix", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), { maxSequenceTokens: 4, textPrefix: "good " });
    const r = t.tokenize("the cat sat");
    expect(r).toEqual({ ok: true, ids: Int32Array.of(2, 10, 4, 3), truncated: true });
    expect(t.countTokens("the cat sat")).toBe(4);
  });

  it("refuses a maxSequenceTokens that leaves no room for text", () => {
    expect(() => new TextTokenizer(tinyTokenizerJson(), { maxSequenceTokens: 2 })).toThrow(
      /maxSequenceTokens/,
    );
  });

  it("classifies bad items", () => {
    const t = new TextTokenizer(tinyTokenizerJson());
    expect(t.tokenize(undefined)).toMatchObject({ ok: false, code: "INVALID_TEXT" });
    expect(t.tokenize(["a"])).toMatchObject({
      ok: false,
      code: "INVALID_TEXT",
      message: expect.stringContaining("array"),
    });
    expect(t.tokenize(" ")).toMatchObject({ ok: false, code: "EMPTY_TEXT" });
    expect(t.tokenize("\udc00")).toMatchObject({ ok: false, code: "INVALID_TEXT" });
    expect(t.tokenize("\u0000")).toMatchObject({ ok: false, code: "TOKENIZE_FAILED" });
    expect(t.countTokens("")).toBe(0);
  });

  it("a text counted first is served from the cache once, then encoded afresh", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), { cacheEntries: 2 });
    t.countTokens("the cat");
    const first = t.tokenize("the cat");
    const second = t.tokenize("the cat");
    expect(first).toEqual(second);
    expect(first).not.toBe(second);
    for (const w of ["a", "b", "c"]) t.countTokens(w);
    expect(t.tokenize("a")).toEqual(t.tokenize("a"));
  });
});
