import { Tokenizer } from "@huggingface/tokenizers";
import { SluiceError } from "../sluice-error.js";

export type TokenizeFailureCode = "EMPTY_TEXT" | "INVALID_TEXT" | "TOKENIZE_FAILED";

export type TokenizedText =
  | { ok: true; ids: Int32Array; truncated: boolean }
  | { ok: false; code: TokenizeFailureCode; message: string };

export interface TextTokenizerOptions {
  /** Longest sequence, special tokens included; longer texts are cut and flagged `truncated`. Default 256. */
  maxSequenceTokens?: number;
  /** Prepended to every text before tokenisation (e.g. BGE's retrieval query instruction). Default "". */
  textPrefix?: string;
  /** Encodings kept between `countTokens` and `tokenize` of the same text (the batcher counts first). Default 4096. */
  cacheEntries?: number;
}

// Unpaired UTF-16 surrogates cannot be encoded as UTF-8 and tokenise inconsistently across implementations.
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * A HF `tokenizer.json` (via @huggingface/tokenizers) plus the rules Sluice adds: item validation with
 * per-item error codes, truncation that keeps the template's special tokens (the JS library has no
 * truncation of its own), and a small cache so a text counted by the batcher is not tokenised twice.
 */
export class TextTokenizer {
  readonly maxSequenceTokens: number;
  private readonly tokenizer: Tokenizer;
  private readonly textPrefix: string;
  private readonly cacheEntries: number;
  private readonly cache = new Map<string, TokenizedText>();
  /** Special tokens the post-processor puts before / after the text (e.g. [CLS] / [SEP]). */
  private readonly prefixTokens: number;
  private readonly suffixTokens: number;

  constructor(tokenizerJson: unknown, options: TextTokenizerOptions = {}) {
    this.maxSequenceTokens = options.maxSequenceTokens ?? 256;
    this.textPrefix = options.textPrefix ?? "";
    this.cacheEntries = options.cacheEntries ?? 4096;
    try {
      this.tokenizer = new Tokenizer(tokenizerJson as object, {});
    } catch (cause) {
      throw new SluiceError("MODEL_LOAD_FAILED", `tokenizer.json could not be loaded: ${String(cause)}`, {
        cause,
      });
    }
    const full = this.tokenizer.encode("a").ids;
    const plain = this.tokenizer.encode("a", { add_special_tokens: false }).ids;
    let start = 0;
    while (start + plain.length <= full.length && !sameIds(full, plain, start)) start++;
    if (start + plain.length > full.length) start = 0;
    this.prefixTokens = start;
    this.suffixTokens = full.length - plain.length - start;
    if (this.prefixTokens + this.suffixTokens >= this.maxSequenceTokens) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `maxSequenceTokens=${this.maxSequenceTokens} leaves no room for text next to the tokenizer's ` +
          `${this.prefixTokens + this.suffixTokens} special tokens; raise it`,
      );
    }
  }

  /** Token count after truncation; an invalid item counts as 0 (it will be rejected, not batched). */
  countTokens(text: unknown): number {
    const result = this.lookup(text, true);
    return result.ok ? result.ids.length : 0;
  }

  /** Tokenises one item; never throws for bad input. Consumes the cache entry left by `countTokens`. */
  tokenize(text: unknown): TokenizedText {
    return this.lookup(text, false);
  }

  private lookup(text: unknown, keep: boolean): TokenizedText {
    if (typeof text !== "string") return this.encode(text);
    const cached = this.cache.get(text);
    if (cached !== undefined) {
      if (!keep) this.cache.delete(text);
      return cached;
    }
    const result = this.encode(text);
    if (keep) {
      if (this.cache.size >= this.cacheEntries) {
        // Map iterates in insertion order: drop the oldest entry.
        const oldest = this.cache.keys().next();
        if (!oldest.done) this.cache.delete(oldest.value);
      }
      this.cache.set(text, result);
    }
    return result;
  }

  private encode(text: unknown): TokenizedText {
    if (typeof text !== "string") {
      const kind = text === null ? "null" : Array.isArray(text) ? "array" : typeof text;
      return { ok: false, code: "INVALID_TEXT", message: `text must be a string, got ${kind}` };
    }
    if (text.trim().length === 0) {
      return { ok: false, code: "EMPTY_TEXT", message: "text is empty or only whitespace" };
    }
    if (LONE_SURROGATE.test(text)) {
      return {
        ok: false,
        code: "INVALID_TEXT",
        message: "text contains unpaired UTF-16 surrogates; send valid Unicode",
      };
    }
    let ids: number[];
    try {
      ids = this.tokenizer.encode(this.textPrefix + text).ids;
    } catch (cause) {
      return { ok: false, code: "TOKENIZE_FAILED", message: `tokenizer failed: ${String(cause)}` };
    }
    if (ids.length <= this.prefixTokens + this.suffixTokens) {
      return {
        ok: false,
        code: "TOKENIZE_FAILED",
        message: "text produced no tokens after normalisation (only control or ignored characters)",
      };
    }
    if (ids.length <= this.maxSequenceTokens)
      return { ok: true, ids: Int32Array.from(ids), truncated: false };
    // Keep the leading special tokens, as much text as fits, and the trailing special tokens (HF
    // "longest_first" truncation for a single sequence).
    const out = new Int32Array(this.maxSequenceTokens);
    const keepText = this.maxSequenceTokens - this.suffixTokens;
    for (let i = 0; i < keepText; i++) out[i] = ids[i]!;
    for (let i = 0; i < this.suffixTokens; i++) out[keepText + i] = ids[ids.length - this.suffixTokens + i]!;
    return { ok: true, ids: out, truncated: true };
  }
}

function sameIds(full: number[], part: number[], at: number): boolean {
  for (let i = 0; i < part.length; i++) if (full[at + i] !== part[i]) return false;
  return true;
}
