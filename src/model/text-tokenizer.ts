import { createHash } from "node:crypto";
import { Tokenizer } from "@huggingface/tokenizers";
import { SluiceError } from "../sluice-error.js";

export type TokenizeFailureCode = "EMPTY_TEXT" | "INVALID_TEXT" | "TOKENIZE_FAILED";

export type TokenizedText =
  | { ok: true; ids: Int32Array; truncated: boolean }
  | { ok: false; code: TokenizeFailureCode; message: string };

/** `maxSequenceTokens` and `textPrefix` are the configuration's (`model.*`; defaults in src/config). */
export interface TextTokenizerOptions {
  /** Longest sequence, special tokens included; longer texts are cut and flagged `truncated`. */
  maxSequenceTokens: number;
  /** Prepended to every text before tokenisation (e.g. BGE's retrieval query instruction). */
  textPrefix: string;
  /**
   * Encodings kept between `countTokens` and `tokenize` of the same text (the batcher counts first),
   * oldest evicted first. Default 4096. Texts over 512 chars are keyed by their SHA-256, so an entry
   * holds at most ~1 KiB of key plus 4 × maxSequenceTokens bytes of ids (~8 MiB at the defaults).
   */
  cacheEntries?: number;
}

/**
 * First window encoded of a long text, in chars per kept token. English runs ~4.5 chars per BGE
 * token; 16 leaves room for denser text, and a too small window only costs a retry 4× larger.
 */
const PREFIX_CHARS_PER_TOKEN = 16;
const PREFIX_GROWTH = 4;
/** Longer texts are cache-keyed by SHA-256 (measured 0.75 ms per MB) rather than by themselves. */
const HASH_KEYS_ABOVE_CHARS = 512;

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
  /** Chars of a long text encoded first; 0 = this pipeline must always encode the whole text. */
  private readonly prefixWindowChars: number;
  /** Special tokens the post-processor puts before / after the text (e.g. [CLS] / [SEP]). */
  private readonly prefixTokens: number;
  private readonly suffixTokens: number;

  constructor(tokenizerJson: unknown, options: TextTokenizerOptions) {
    this.maxSequenceTokens = options.maxSequenceTokens;
    this.textPrefix = options.textPrefix;
    this.cacheEntries = options.cacheEntries ?? 4096;
    if (!Number.isInteger(this.maxSequenceTokens) || this.maxSequenceTokens < 1) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `maxSequenceTokens must be a positive integer, got ${String(options.maxSequenceTokens)}`,
      );
    }
    if (!Number.isInteger(this.cacheEntries) || this.cacheEntries < 0) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `cacheEntries must be an integer >= 0, got ${String(options.cacheEntries)}`,
      );
    }
    this.prefixWindowChars = prefixCutIsExact(tokenizerJson)
      ? this.maxSequenceTokens * PREFIX_CHARS_PER_TOKEN
      : 0;
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

  /** Entries held by the count cache. */
  get cacheSize(): number {
    return this.cache.size;
  }

  private lookup(text: unknown, keep: boolean): TokenizedText {
    if (typeof text !== "string" || this.cacheEntries === 0) return this.encode(text);
    const key = cacheKey(text);
    const cached = this.cache.get(key);
    if (cached !== undefined) {
      if (!keep) this.cache.delete(key);
      return cached;
    }
    const result = this.encode(text);
    if (keep) {
      if (this.cache.size >= this.cacheEntries) {
        // Map iterates in insertion order: drop the oldest entry.
        const oldest = this.cache.keys().next();
        if (!oldest.done) this.cache.delete(oldest.value);
      }
      this.cache.set(key, result);
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
      ids = this.encodeBounded(this.textPrefix + text);
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

  /**
   * Ids of `full`, or of a prefix whose ids already decide the result. The prefix ends just before
   * an ASCII whitespace char and is accepted only if it yields more than maxSequenceTokens ids, so
   * the caller truncates it exactly as it would truncate the whole text; otherwise the window grows.
   *
   * Why the prefix's tokens are the whole text's first tokens, for pipelines `prefixCutIsExact`
   * accepts: no added token contains whitespace, so none spans the cut; the normalisers work char by
   * char except lowercasing's final-sigma rule and NFD's mark reordering, and neither looks across a
   * whitespace char (it is neither cased nor case-ignorable, and has combining class 0); the
   * pre-tokenisers split at whitespace and drop it, so the prefix's words are the text's first words;
   * WordPiece encodes each word on its own; the post-processor only puts special tokens around.
   */
  private encodeBounded(full: string): number[] {
    let window = this.prefixWindowChars;
    while (window > 0 && window < full.length) {
      const cut = nextAsciiWhitespace(full, window);
      if (cut < 0) break;
      const ids = this.tokenizer.encode(full.slice(0, cut)).ids;
      if (ids.length > this.maxSequenceTokens) return ids;
      window = cut * PREFIX_GROWTH;
    }
    return this.tokenizer.encode(full).ids;
  }
}

function nextAsciiWhitespace(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) return i;
  }
  return -1;
}

/** Texts over 512 chars are keyed by hash; the tag char keeps the two key kinds apart. */
function cacheKey(text: string): string {
  return text.length > HASH_KEYS_ABOVE_CHARS
    ? `#${createHash("sha256").update(text).digest("base64")}`
    : `=${text}`;
}

// Pipeline stages under which a prefix cut before whitespace tokenises exactly like the whole text's
// beginning (argument at `encodeBounded`). Anything else (Replace/Precompiled normalisers, NFC/NFKC,
// ByteLevel/Metaspace/Split pre-tokenisers, BPE/Unigram) gets no cut.
const WORD_LOCAL_NORMALIZERS = new Set([
  "BertNormalizer",
  "Lowercase",
  "NFD",
  "NFKD",
  "StripAccents",
  "Strip",
]);
const WORD_LOCAL_PRE_TOKENIZERS = new Set(["BertPreTokenizer", "Whitespace", "WhitespaceSplit"]);

/** True when encoding a prefix cut before an ASCII whitespace char gives the whole text's first tokens. */
export function prefixCutIsExact(tokenizerJson: unknown): boolean {
  if (typeof tokenizerJson !== "object" || tokenizerJson === null) return false;
  const j = tokenizerJson as Record<string, unknown>;
  const model = j.model as { type?: unknown } | null | undefined;
  if (model?.type !== "WordPiece") return false;
  if (!stagesIn(j.normalizer, "normalizers", WORD_LOCAL_NORMALIZERS, true)) return false;
  if (!stagesIn(j.pre_tokenizer, "pretokenizers", WORD_LOCAL_PRE_TOKENIZERS, false)) return false;
  // An added token must not span the cut: no whitespace in it, and one matched after normalisation
  // (normalized defaults to !special) must be plain ASCII, which no accepted normaliser widens
  // (BertNormalizer pads CJK characters with spaces).
  const added: unknown[] = Array.isArray(j.added_tokens) ? j.added_tokens : [];
  return added.every((t) => {
    if (typeof t !== "object" || t === null) return false;
    const { content, normalized, special } = t as Record<string, unknown>;
    if (typeof content !== "string" || /\s/u.test(content)) return false;
    return !(normalized ?? special !== true) || /^[\x21-\x7e]*$/.test(content);
  });
}

/** Every stage of a (possibly Sequence) pipeline step is in `allowed`; null passes only if `nullOk`. */
function stagesIn(step: unknown, listKey: string, allowed: Set<string>, nullOk: boolean): boolean {
  if (step === null || step === undefined) return nullOk;
  if (typeof step !== "object") return false;
  const s = step as Record<string, unknown>;
  if (s.type === "Sequence") {
    const list = s[listKey];
    return Array.isArray(list) && list.length > 0 && list.every((x) => stagesIn(x, listKey, allowed, false));
  }
  return typeof s.type === "string" && allowed.has(s.type);
}

function sameIds(full: number[], part: number[], at: number): boolean {
  for (let i = 0; i < part.length; i++) if (full[at + i] !== part[i]) return false;
  return true;
}
