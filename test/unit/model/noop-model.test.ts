import { describe, expect, it } from "vitest";
import { NoopModel, wordCount } from "../../../src/model/noop-model.js";

/** The rule wordCount stands for: JavaScript's own whitespace split. */
const splitCount = (text: string) => (text.trim().length > 0 ? text.trim().split(/\s+/).length : 0);

describe("wordCount", () => {
  it("counts words as a split on JavaScript whitespace does", () => {
    const spaces = [
      " ",
      "\t",
      "\n",
      "\v",
      "\f",
      "\r",
      "\u00a0",
      "\u1680",
      "\u2000",
      "\u200a",
      "\u2028",
      "\u2029",
      "\u202f",
      "\u205f",
      "\u3000",
      "\ufeff",
    ];
    const words = ["a", "héllo", "x1", "日本", "\u200b", "—", "😀"];
    let seed = 7;
    const next = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed;
    };
    for (let n = 0; n < 500; n++) {
      const parts = Array.from({ length: next() % 12 }, () =>
        next() % 2 === 0 ? spaces[next() % spaces.length] : words[next() % words.length],
      );
      const text = parts.join("");
      expect(wordCount(text), JSON.stringify(text)).toBe(splitCount(text));
    }
    expect(wordCount("")).toBe(0);
    expect(wordCount("   \n ")).toBe(0);
    expect(wordCount("  two words ")).toBe(2);
  });

  it("is the no-op model's token count plus 2, and 0 for blank or non-string text", () => {
    const model = new NoopModel();
    expect(model.countTokens("three small words")).toBe(5);
    expect(model.countTokens("   ")).toBe(0);
    expect(model.countTokens(42 as unknown as string)).toBe(0);
  });
});
