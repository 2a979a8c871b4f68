import type { ModelIdentity } from "../contracts/inference.js";
import type { ItemOutcome, ModelCallStats, ModelPort } from "./model-port.js";

export interface NoopModelOptions {
  /** Length of the zero embedding returned for every item. Default 384 (same payload size as BGE-small). */
  dimensions?: number;
}

/**
 * NOT A MODEL: a `ModelPort` that returns a fixed-size zero embedding for every valid text, so the
 * Kafka ceiling (consume → transaction → produce) can be benchmarked without inference cost. Used only
 * when the user asks for `--model noop`. It validates items like the real runner (EMPTY_TEXT,
 * INVALID_TEXT) and counts whitespace-separated words + 2 as tokens.
 */
export class NoopModel implements ModelPort {
  readonly identity: ModelIdentity = { name: "noop", version: "noop" };
  readonly task = "embedding" as const;
  readonly dimensions: number;
  /** The one zero embedding every item gets (read-only downstream, as every model output is). */
  private readonly zeros: number[];

  constructor(options: NoopModelOptions = {}) {
    this.dimensions = options.dimensions ?? 384;
    if (!Number.isInteger(this.dimensions) || this.dimensions < 1) {
      throw new RangeError(`NoopModel dimensions must be a positive integer, got ${options.dimensions}`);
    }
    this.zeros = zeros(this.dimensions);
  }

  countTokens(text: string): number {
    if (typeof text !== "string") return 0;
    const words = wordCount(text);
    return words > 0 ? words + 2 : 0;
  }

  async run(texts: readonly unknown[]): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }> {
    const started = performance.now();
    let tokens = 0;
    const outcomes = texts.map((text): ItemOutcome => {
      if (typeof text !== "string") {
        return { ok: false, code: "INVALID_TEXT", message: `text must be a string, got ${typeof text}` };
      }
      const count = this.countTokens(text);
      if (count === 0) return { ok: false, code: "EMPTY_TEXT", message: "text is empty or only whitespace" };
      tokens += count;
      return {
        ok: true,
        output: { embedding: this.zeros },
        tokens: count,
        truncated: false,
      };
    });
    return {
      outcomes,
      stats: { inferenceMs: performance.now() - started, realTokens: tokens, paddedTokens: tokens },
    };
  }

  async close(): Promise<void> {}
}

/**
 * A packed array of `n` zeros, the kind of array the real tasks return (`Array.from` of an output
 * row). `new Array(n).fill(0)` is a holey array, which JSON.stringify writes about 3× slower (7 against
 * 2.3 µs for 384 zeros on Node 20): the no-op model would then measure V8's slow path, not Sluice's.
 * Not frozen, for the same reason (a frozen array takes the slow path too). It is made once per model
 * and shared by every item: allocating 3 KB per item was a cost of its own at the ceiling.
 */
function zeros(n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(0);
  return out;
}

/**
 * The number of whitespace-separated words in `text` (`text.trim().split(/\s+/).length` for a text
 * that is not blank, else 0), in one pass without allocating: the no-op model stands for zero model
 * cost, so its token count must not be a cost of its own at the ceiling.
 */
export function wordCount(text: string): number {
  let words = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const space = isWhitespace(text.charCodeAt(i));
    if (!space && !inWord) words++;
    inWord = !space;
  }
  return words;
}

/** JavaScript's `\s`: the ECMAScript WhiteSpace and LineTerminator code points. */
function isWhitespace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}
