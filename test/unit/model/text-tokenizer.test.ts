import { Tokenizer } from "@huggingface/tokenizers";
import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { prefixCutIsExact, TextTokenizer } from "../../../src/model/text-tokenizer.js";
import { tinyTokenIds, tinyTokenizerJson } from "../../support/tiny-onnx.js";

/** The configuration's defaults (`model.maxSequenceTokens`, `model.textPrefix`). */
const { maxSequenceTokens, textPrefix } = defaultConfig().model;
const CONFIGURED = { maxSequenceTokens, textPrefix };

describe("TextTokenizer", () => {
  it("encodes with the tokenizer.json's template ([CLS] … [SEP])", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), CONFIGURED);
    const r = t.tokenize("The cat sat, zebra!");
    expect(r).toEqual({
      ok: true,
      ids: Int32Array.from(tinyTokenIds("The cat sat, zebra!")),
      truncated: false,
    });
  });

  it("truncates keeping the trailing special token, and applies the text prefix", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), {
      ...CONFIGURED,
      maxSequenceTokens: 4,
      textPrefix: "good ",
    });
    const r = t.tokenize("the cat sat");
    expect(r).toEqual({ ok: true, ids: Int32Array.of(2, 10, 4, 3), truncated: true });
    expect(t.countTokens("the cat sat")).toBe(4);
  });

  it("refuses a maxSequenceTokens that leaves no room for text", () => {
    expect(() => new TextTokenizer(tinyTokenizerJson(), { ...CONFIGURED, maxSequenceTokens: 2 })).toThrow(
      /maxSequenceTokens/,
    );
  });

  it("classifies bad items", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), CONFIGURED);
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
    const t = new TextTokenizer(tinyTokenizerJson(), { ...CONFIGURED, cacheEntries: 2 });
    t.countTokens("the cat");
    const first = t.tokenize("the cat");
    const second = t.tokenize("the cat");
    expect(first).toEqual(second);
    expect(first).not.toBe(second);
    for (const w of ["a", "b", "c"]) t.countTokens(w);
    expect(t.tokenize("a")).toEqual(t.tokenize("a"));
  });
});

/** What the whole text gives: encode it all, then keep the leading tokens and the trailing [SEP]. */
function wholeTextReference(json: object, text: string, max: number): { ids: number[]; truncated: boolean } {
  const ids = new Tokenizer(json, {}).encode(text).ids;
  if (ids.length <= max) return { ids, truncated: false };
  return { ids: [...ids.slice(0, max - 1), ids[ids.length - 1]!], truncated: true };
}

function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const WORDS = [
  "the",
  "cat",
  "sat",
  "zebra",
  "ΣΑΣ",
  "Σ",
  "é",
  "e\u0301",
  "\u0301",
  "中文",
  "[SEP]",
  "[CLS]",
  ",",
  ".",
  "!",
  "'",
  "x".repeat(120),
];
const BLANKS = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u0000", " ".repeat(30)];

/** Random text of about `length` chars; `blankShare` of the pieces are blanks/ignored characters. */
function randomText(rnd: () => number, length: number, blankShare: number): string {
  let text = "";
  while (text.length < length) {
    const from = rnd() < blankShare ? BLANKS : WORDS;
    text += from[Math.floor(rnd() * from.length)];
  }
  return text;
}

describe("TextTokenizer on long texts (encodes a bounded prefix)", () => {
  const big = "The cat sat on the mat, and the dog sat too! ".repeat(23_000); // ~1 MB

  it("counts a 1 MB text from a prefix, with ids equal to the first ones of the whole encoding", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), {
      ...CONFIGURED,
      maxSequenceTokens: 256,
      cacheEntries: 0,
    });
    expect(big.length).toBeGreaterThan(1_000_000);
    const started = performance.now();
    const count = t.countTokens(big);
    const boundedMs = performance.now() - started;
    const r = t.tokenize(big);
    const wholeStarted = performance.now();
    const reference = wholeTextReference(tinyTokenizerJson(), big, 256);
    const wholeMs = performance.now() - wholeStarted;
    expect(count).toBe(256);
    expect(r).toEqual({ ok: true, ids: Int32Array.from(reference.ids), truncated: true });
    expect(reference.ids.slice(0, 255)).toEqual(tinyTokenIds(big).slice(0, 255));
    // Measured, not asserted (timings vary with the machine).
    console.log(
      `1 MB text, tiny tokenizer: countTokens ${boundedMs.toFixed(1)} ms, whole ${wholeMs.toFixed(0)} ms`,
    );
  });

  it("keeps `truncated` exact when the window holds too few tokens (grows, at worst encodes all)", () => {
    // maxSequenceTokens 4 → window 64 chars; the words after the long run of blanks decide.
    const t = new TextTokenizer(tinyTokenizerJson(), {
      ...CONFIGURED,
      maxSequenceTokens: 4,
      cacheEntries: 0,
    });
    const blanks = " \t\n".repeat(400);
    expect(t.tokenize(`cat${blanks}sat`)).toEqual({
      ok: true,
      ids: Int32Array.from(tinyTokenIds("cat sat")),
      truncated: false,
    });
    expect(t.tokenize(`cat${blanks}sat${blanks}`)).toMatchObject({ truncated: false });
    const three = t.tokenize(`cat${blanks}sat${blanks}mat`);
    expect(three).toEqual({
      ok: true,
      ids: Int32Array.from([...tinyTokenIds("cat sat").slice(0, 3), 3]),
      truncated: true,
    });
    // A prefix with exactly maxSequenceTokens ids does not decide: what follows may add nothing.
    const exact = `${"cat ".repeat(1)}sat${" ".repeat(100)}`;
    expect(t.tokenize(exact)).toMatchObject({ truncated: false });
    expect(t.tokenize(`${exact}\u0000\u0001`)).toMatchObject({ truncated: false });
    expect(t.tokenize(`${exact}.`)).toMatchObject({ truncated: true });
  });

  it("never cuts inside a word or an added token at the window's edge", () => {
    // maxSequenceTokens 3 → window 48 chars, which ends inside "[SEP]": cut there, "[S" would give
    // "[", "s" (two tokens, enough to decide) and keep "[" instead of the literal [SEP].
    const t = new TextTokenizer(tinyTokenizerJson(), {
      ...CONFIGURED,
      maxSequenceTokens: 3,
      cacheEntries: 0,
    });
    const text = `${" ".repeat(46)}[SEP] cat`;
    expect(t.tokenize(text)).toEqual({ ok: true, ids: Int32Array.of(2, 3, 3), truncated: true });
    expect(t.tokenize(`${" ".repeat(46)}zebra cat`)).toEqual({
      ok: true,
      ids: Int32Array.from([...tinyTokenIds("zebra").slice(0, 2), 3]),
      truncated: true,
    });
  });

  it("gives exactly the whole text's result on random texts (Greek sigma, marks, CJK, added tokens)", () => {
    // Sparse texts (mostly blanks) put the kept tokens' end near the cut, where a wrong cut would show.
    const json = tinyTokenizerJson();
    const rnd = seededRandom(7);
    let decidedByPrefix = 0;
    for (let round = 0; round < 400; round++) {
      const max = 3 + Math.floor(rnd() * 12);
      const t = new TextTokenizer(json, { ...CONFIGURED, maxSequenceTokens: max, cacheEntries: 0 });
      const text = randomText(rnd, Math.floor(rnd() * max * 60), rnd());
      const got = t.tokenize(text);
      const want = wholeTextReference(json, text, max);
      if (!got.ok) {
        expect(want.ids.length <= 2, JSON.stringify(text)).toBe(true);
        continue;
      }
      if (want.truncated && text.length > max * 16) decidedByPrefix++;
      expect({ ids: [...got.ids], truncated: got.truncated }, JSON.stringify(text)).toEqual(want);
    }
    expect(decidedByPrefix).toBeGreaterThan(50);
  });

  it("bounds the count cache: oldest entries go, long texts are keyed by a hash", () => {
    const t = new TextTokenizer(tinyTokenizerJson(), { ...CONFIGURED, cacheEntries: 16 });
    for (let i = 0; i < 1000; i++) t.countTokens(`the cat ${i} ${"x".repeat(i)}`);
    expect(t.cacheSize).toBe(16);
    t.countTokens(big);
    expect(t.cacheSize).toBe(16);
    const cached = t.tokenize(big); // consumes the entry counted above
    expect(t.cacheSize).toBe(15);
    expect(t.tokenize(big)).toEqual(cached);
    expect(t.cacheSize).toBe(15);
    // Texts that differ only after the encoded prefix have separate entries (the key is the whole text).
    t.countTokens(`${big}zebra`);
    t.countTokens(`${big}cat`);
    expect(t.cacheSize).toBe(16);
  });

  it("cuts only pipelines where a prefix tokenises like the whole text's beginning", () => {
    const tiny = tinyTokenizerJson() as Record<string, unknown>;
    expect(prefixCutIsExact(tiny)).toBe(true);
    expect(prefixCutIsExact({ ...tiny, pre_tokenizer: { type: "Metaspace" } })).toBe(false);
    expect(prefixCutIsExact({ ...tiny, pre_tokenizer: null })).toBe(false);
    expect(
      prefixCutIsExact({
        ...tiny,
        pre_tokenizer: {
          type: "Sequence",
          pretokenizers: [{ type: "WhitespaceSplit" }, { type: "Whitespace" }],
        },
      }),
    ).toBe(true);
    expect(prefixCutIsExact({ ...tiny, normalizer: { type: "NFC" } })).toBe(false);
    expect(prefixCutIsExact({ ...tiny, model: { ...(tiny.model as object), type: "BPE" } })).toBe(false);
    const added = tiny.added_tokens as object[];
    expect(
      prefixCutIsExact({ ...tiny, added_tokens: [...added, { id: 9, content: "new york", special: true }] }),
    ).toBe(false);
    expect(
      prefixCutIsExact({ ...tiny, added_tokens: [...added, { id: 9, content: "中", special: false }] }),
    ).toBe(false);
  });
});
