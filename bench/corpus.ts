import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";

/**
 * A deterministic, mixed-length set of real, human-written English sentences for benchmarks, taken
 * from documentation Debian packages install (`/usr/share/doc`, `/usr/share/common-licenses`). No
 * network, no bundled data; the same machine image always yields the same corpus.
 */
export interface CorpusOptions {
  /** Roots to scan. Default: /usr/share/doc and /usr/share/common-licenses. */
  roots?: string[];
  /** Sentences outside this word range are dropped. Defaults 3 and 80. */
  minWords?: number;
  maxWords?: number;
}

const DEFAULT_ROOTS = ["/usr/share/doc", "/usr/share/common-licenses"];
// Prose-bearing files; HTML, Makefiles and examples are skipped.
const FILE_PATTERN = /(^README|^NEWS|^copyright$|^changelog|^AUTHORS|^TODO|\.txt$|\.md$|\.gz$)/i;
const MAX_FILE_BYTES = 2_000_000;
// Some changelogs decompress to megabytes of near-identical entries; the head of each file is plenty
// and keeps the scan to a few seconds.
const MAX_TEXT_CHARS = 100_000;

let cached: { key: string; sentences: string[] } | null = null;

/**
 * Returns `n` sentences (fewer only if the machine has fewer), in a stable pseudo-random order
 * (sorted by SHA-1 of the sentence) so every prefix mixes lengths and sources.
 */
export function loadCorpus(n: number, options: CorpusOptions = {}): string[] {
  const roots = options.roots ?? DEFAULT_ROOTS;
  const minWords = options.minWords ?? 3;
  const maxWords = options.maxWords ?? 80;
  const key = JSON.stringify([roots, minWords, maxWords]);
  if (cached?.key !== key) cached = { key, sentences: buildCorpus(roots, minWords, maxWords) };
  return cached.sentences.slice(0, n);
}

function buildCorpus(roots: string[], minWords: number, maxWords: number): string[] {
  const files: string[] = [];
  for (const root of roots) walk(root, files, root.endsWith("common-licenses"));
  files.sort();
  const seen = new Set<string>();
  for (const file of files) {
    let text: string;
    try {
      const raw = readFileSync(file);
      text = (file.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8", 0, MAX_TEXT_CHARS);
    } catch {
      continue;
    }
    for (const sentence of sentences(text)) {
      const words = sentence.split(" ").length;
      if (words >= minWords && words <= maxWords && isProse(sentence)) seen.add(sentence);
    }
  }
  const keyed = [...seen].map((s) => ({ s, h: createHash("sha1").update(s).digest("hex") }));
  keyed.sort((a, b) => (a.h < b.h ? -1 : a.h > b.h ? 1 : a.s < b.s ? -1 : 1));
  return keyed.map((k) => k.s);
}

function walk(dir: string, out: string[], takeAll: boolean): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const path = join(dir, name);
    let st: ReturnType<typeof statSync>;
    try {
      st = statSync(path);
    } catch {
      continue;
    }
    if (st.isDirectory()) walk(path, out, takeAll);
    else if (st.isFile() && st.size <= MAX_FILE_BYTES && (takeAll || FILE_PATTERN.test(name))) out.push(path);
  }
}

function* sentences(text: string): Generator<string> {
  // Paragraphs first (blank lines), then sentence ends followed by a capital letter.
  for (const paragraph of text.split(/\n\s*\n/)) {
    const flat = paragraph
      .replace(/^\s*[-*+#>|]+\s*/gm, " ")
      .replace(/\s+/g, " ")
      .trim();
    if (flat.length === 0) continue;
    for (const part of flat.split(/(?<=[.!?])\s+(?=[A-Z"'(])/)) yield part.trim();
  }
}

function isProse(s: string): boolean {
  if (!/^[A-Z]/.test(s) || !/[.!?]$/.test(s)) return false;
  if (/https?:|www\.|@|\t|[{}<>=_\\|~^]|\.\.\.|--|\s-\S/.test(s)) return false;
  return s.replace(/[^A-Za-z ]/g, "").length / s.length >= 0.9;
}

/**
 * `n` paragraphs of realistic, mixed length for latency benchmarks: consecutive corpus sentences
 * joined until a target word count drawn from a log-normal distribution (median 20 words ≈ 25 tokens,
 * p90 ≈ 72 words ≈ 90 tokens, p99 ≈ 200 words ≈ 256 tokens, capped at 230 words), deterministic for a
 * given seed. Not one-line sentences: a model's time and padding depend on the length spread.
 */
export function loadParagraphs(n: number, seed = 1): string[] {
  const sentences = loadCorpus(20_000);
  if (sentences.length === 0) return [];
  let state = seed >>> 0 || 1;
  const uniform = () => {
    // xorshift32: deterministic, no dependency.
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) + 0.5) / 4294967296;
  };
  const out: string[] = [];
  let cursor = 0;
  for (let i = 0; i < n; i++) {
    // Box–Muller: a standard normal from two uniforms.
    const z = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
    const target = Math.min(230, Math.max(6, Math.round(20 * Math.exp(1.0 * z))));
    const parts: string[] = [];
    let words = 0;
    while (words < target) {
      const s = sentences[cursor++ % sentences.length] as string;
      parts.push(s);
      words += s.split(/\s+/).length;
    }
    out.push(parts.join(" ").split(/\s+/).slice(0, target).join(" "));
  }
  return out;
}
