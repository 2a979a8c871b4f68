import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ModelSettingsInput, modelSettings } from "../../../src/config/model-settings.js";
import type { ItemOutcome } from "../../../src/model/model-port.js";
import { TextModelRunner } from "../../../src/model/text-model-runner.js";
import { isSluiceError } from "../../../src/sluice-error.js";
import {
  createTinyModel,
  TINY_LABELS,
  TINY_POISON_WORD,
  type TinyModel,
  tinyClassifierReference,
  tinyHiddenReference,
  tinyTokenIds,
} from "../../support/tiny-onnx.js";

const TEXTS = [
  "the cat sat on the mat",
  "good movie",
  "a very very bad awful movie is bad",
  "dog",
  "the great dog is very good , the cat is awful",
];

function ok(outcome: ItemOutcome | undefined) {
  if (outcome === undefined || !outcome.ok)
    throw new Error(`expected ok outcome, got ${JSON.stringify(outcome)}`);
  return outcome;
}

function maxAbsDiff(a: readonly number[], b: readonly number[]): number {
  expect(a.length).toBe(b.length);
  return a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);
}

function l2(v: number[]): number[] {
  const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return v.map((x) => x / n);
}

let dir: string;
let classifierFiles: TinyModel;
let embeddingFiles: TinyModel;
let classifier: TextModelRunner;
let meanEmbedder: TextModelRunner;
const extra: TextModelRunner[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-model-"));
  classifierFiles = await createTinyModel(join(dir, "cls"), { task: "classification" });
  embeddingFiles = await createTinyModel(join(dir, "emb"), { task: "embedding" });
  classifier = await TextModelRunner.create(
    modelSettings({
      modelPath: classifierFiles.modelPath,
      tokenizerPath: classifierFiles.tokenizerPath,
      task: "classification",
      labels: classifierFiles.labels,
    }),
  );
  meanEmbedder = await TextModelRunner.create(
    modelSettings({
      modelPath: embeddingFiles.modelPath,
      tokenizerPath: embeddingFiles.tokenizerPath,
      task: "embedding",
      pooling: "mean",
      name: "tiny-embedding",
    }),
  );
});

afterAll(async () => {
  await Promise.all([classifier?.close(), meanEmbedder?.close(), ...extra.map((r) => r.close())]);
  await rm(dir, { recursive: true, force: true });
});

async function runner(options: Partial<ModelSettingsInput>): Promise<TextModelRunner> {
  const r = await TextModelRunner.create(
    modelSettings({
      modelPath: embeddingFiles.modelPath,
      tokenizerPath: embeddingFiles.tokenizerPath,
      ...options,
    }),
  );
  extra.push(r);
  return r;
}

describe("TextModelRunner on tiny generated models", () => {
  it("classification: softmax over logits matches the hand computation, with labels", async () => {
    const { outcomes } = await classifier.run(TEXTS);
    expect(outcomes).toHaveLength(TEXTS.length);
    TEXTS.forEach((text, i) => {
      const out = ok(outcomes[i]);
      const expected = tinyClassifierReference(tinyTokenIds(text));
      const scores = TINY_LABELS.map((l) => out.output.scores![l]!);
      expect(maxAbsDiff(scores, expected)).toBeLessThan(1e-6);
      expect(out.output.label).toBe(TINY_LABELS[expected.indexOf(Math.max(...expected))]);
      expect(out.tokens).toBe(tinyTokenIds(text).length);
      expect(out.truncated).toBe(false);
    });
  });

  it("embedding: mean pooling over the attention mask, L2-normalised", async () => {
    const { outcomes } = await meanEmbedder.run(TEXTS);
    TEXTS.forEach((text, i) => {
      const hidden = tinyHiddenReference(tinyTokenIds(text));
      const mean = hidden[0]!.map((_, h) => hidden.reduce((s, row) => s + row[h]!, 0) / hidden.length);
      const emb = ok(outcomes[i]).output.embedding!;
      expect(maxAbsDiff(emb, l2(mean))).toBeLessThan(1e-6);
      expect(Math.hypot(...emb)).toBeCloseTo(1, 6);
    });
  });

  it("embedding: CLS pooling takes position 0; normalize=false keeps raw values", async () => {
    const cls = await runner({ pooling: "cls", normalize: false });
    const { outcomes } = await cls.run(TEXTS);
    TEXTS.forEach((text, i) => {
      const cls0 = tinyHiddenReference(tinyTokenIds(text))[0]!;
      expect(maxAbsDiff(ok(outcomes[i]).output.embedding!, cls0)).toBeLessThan(1e-6);
    });
  });

  it("dynamic padding and bucketing change neither numbers nor order", async () => {
    const shuffled = [TEXTS[2]!, TEXTS[3]!, TEXTS[0]!, TEXTS[4]!, TEXTS[1]!, TEXTS[3]!];
    const singles = await Promise.all(
      shuffled.map(async (t) => ok((await meanEmbedder.run([t])).outcomes[0])),
    );
    for (const bucketing of [true, false]) {
      const r = await runner({ pooling: "mean", bucketing });
      const { outcomes, stats } = await r.run(shuffled);
      shuffled.forEach((_, i) => {
        expect(maxAbsDiff(ok(outcomes[i]).output.embedding!, singles[i]!.output.embedding!)).toBeLessThan(
          1e-6,
        );
      });
      const lengths = shuffled.map((t) => tinyTokenIds(t).length);
      expect(stats.realTokens).toBe(lengths.reduce((a, b) => a + b, 0));
      if (!bucketing) expect(stats.paddedTokens).toBe(Math.max(...lengths) * lengths.length);
      else expect(stats.paddedTokens).toBeLessThan(Math.max(...lengths) * lengths.length);
    }
  });

  it("truncates to maxSequenceTokens, keeps [CLS]/[SEP], and says so", async () => {
    const r = await runner({
      task: "classification",
      modelPath: classifierFiles.modelPath,
      labels: [...TINY_LABELS],
      maxSequenceTokens: 5,
    });
    const long = "the cat sat on the mat";
    const { outcomes } = await r.run([long, "dog"]);
    const out = ok(outcomes[0]);
    expect(out.truncated).toBe(true);
    expect(out.tokens).toBe(5);
    const ids = tinyTokenIds(long);
    const truncated = [...ids.slice(0, 4), ids[ids.length - 1]!]; // [CLS] the cat sat [SEP]
    expect(truncated[4]).toBe(3);
    const scores = TINY_LABELS.map((l) => out.output.scores![l]!);
    expect(maxAbsDiff(scores, tinyClassifierReference(truncated))).toBeLessThan(1e-6);
    expect(ok(outcomes[1]).truncated).toBe(false);
    expect(r.countTokens(long)).toBe(5);
    expect(r.countTokens("dog")).toBe(3);
  });

  it("bad items get their own error codes and never fail their neighbours", async () => {
    const texts: unknown[] = [
      "good movie",
      "",
      "   \n\t",
      42,
      null,
      "bad \ud800 text",
      "\u0000\u0001",
      `the ${TINY_POISON_WORD} cat`,
      "the cat sat",
    ];
    const { outcomes } = await classifier.run(texts);
    const codes = outcomes.map((o) => (o.ok ? "ok" : o.code));
    expect(codes).toEqual([
      "ok",
      "EMPTY_TEXT",
      "EMPTY_TEXT",
      "INVALID_TEXT",
      "INVALID_TEXT",
      "INVALID_TEXT",
      "TOKENIZE_FAILED",
      "INFERENCE_FAILED",
      "ok",
    ]);
    for (const o of outcomes) if (!o.ok) expect(o.message.length).toBeGreaterThan(5);
    const good = ok(outcomes[8]);
    const expected = tinyClassifierReference(tinyTokenIds("the cat sat"));
    expect(
      maxAbsDiff(
        TINY_LABELS.map((l) => good.output.scores![l]!),
        expected,
      ),
    ).toBeLessThan(1e-6);
  });

  it("an ORT failure of a whole batch is isolated to the bad item without bucketing too", async () => {
    const r = await runner({
      task: "classification",
      modelPath: classifierFiles.modelPath,
      bucketing: false,
    });
    const { outcomes } = await r.run(["good", `${TINY_POISON_WORD}`, "bad movie", "the cat sat on the mat"]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, true, true]);
    expect(outcomes[1]).toMatchObject({ ok: false, code: "INFERENCE_FAILED" });
  });

  it("labels come from model metadata (id2label) when options give none, else LABEL_i", async () => {
    const withMeta = await createTinyModel(join(dir, "meta"), {
      task: "classification",
      labelsInMetadata: true,
    });
    const r = await runner({
      task: "classification",
      modelPath: withMeta.modelPath,
      tokenizerPath: withMeta.tokenizerPath,
    });
    expect(r.description.labels).toEqual([...TINY_LABELS]);
    const plain = await runner({ task: "classification", modelPath: classifierFiles.modelPath });
    expect(plain.description.labels).toEqual(["LABEL_0", "LABEL_1", "LABEL_2"]);
    const { outcomes } = await plain.run(["good"]);
    expect(Object.keys(ok(outcomes[0]).output.scores!)).toEqual(["LABEL_0", "LABEL_1", "LABEL_2"]);
    await expect(
      TextModelRunner.create(
        modelSettings({
          modelPath: classifierFiles.modelPath,
          tokenizerPath: classifierFiles.tokenizerPath,
          task: "classification",
          labels: ["a", "b"],
        }),
      ),
    ).rejects.toMatchObject({ code: "CONFIG_INVALID" });
  });

  it("maps renamed model inputs through inputNames, and explains unmapped ones", async () => {
    const renamed = await createTinyModel(join(dir, "renamed"), {
      task: "embedding",
      inputNames: { inputIds: "ids", attentionMask: "mask", tokenTypeIds: "segments" },
    });
    const base = {
      modelPath: renamed.modelPath,
      tokenizerPath: renamed.tokenizerPath,
      pooling: "mean" as const,
    };
    const error = await TextModelRunner.create(modelSettings(base)).catch((e: unknown) => e);
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect(String((error as Error).message)).toContain("ids, mask, segments");
    const r = await runner({
      ...base,
      inputNames: { input_ids: "ids", attention_mask: "mask", token_type_ids: "segments" },
    });
    expect(r.description.feeds).toEqual({ inputIds: "ids", attentionMask: "mask", tokenTypeIds: "segments" });
    const [a, b] = await Promise.all([r.run(TEXTS), meanEmbedder.run(TEXTS)]);
    TEXTS.forEach((_, i) => {
      expect(maxAbsDiff(ok(a.outcomes[i]).output.embedding!, ok(b.outcomes[i]).output.embedding!)).toBe(0);
    });
  });

  it("identity: version is the first 12 hex of SHA-256 over model then tokenizer; tokenizer hash exposed", async () => {
    const model = await readFile(embeddingFiles.modelPath);
    const tokenizer = await readFile(embeddingFiles.tokenizerPath);
    const version = createHash("sha256").update(model).update(tokenizer).digest("hex").slice(0, 12);
    expect(meanEmbedder.identity).toEqual({ name: "tiny-embedding", version });
    expect(meanEmbedder.tokenizerHash).toBe(createHash("sha256").update(tokenizer).digest("hex"));
    const named = await runner({ name: "my-model" });
    expect(named.identity).toEqual({ name: "my-model", version });
  });

  it("two workers and item isolation give the same outputs as one worker", async () => {
    const many = Array.from({ length: 40 }, (_, i) => TEXTS[i % TEXTS.length]!);
    const reference = await meanEmbedder.run(many);
    const two = await runner({ pooling: "mean", workers: 2, itemIsolation: "always" });
    expect(two.description.isolateItems).toBe(true);
    expect(meanEmbedder.description.batchDependent).toBe(false);
    const [x, y] = await Promise.all([two.run(many), two.run(many.slice().reverse())]);
    many.forEach((_, i) => {
      const expected = ok(reference.outcomes[i]).output.embedding!;
      expect(maxAbsDiff(ok(x.outcomes[i]).output.embedding!, expected)).toBeLessThan(1e-6);
      expect(maxAbsDiff(ok(y.outcomes[many.length - 1 - i]).output.embedding!, expected)).toBeLessThan(1e-6);
    });
  });

  it("rejects invalid options and missing files with clear codes", async () => {
    const base = { modelPath: embeddingFiles.modelPath, tokenizerPath: embeddingFiles.tokenizerPath };
    await expect(runner({ ...base, workers: 0 })).rejects.toMatchObject({
      code: "CONFIG_INVALID",
    });
    await expect(runner({ ...base, pooling: "max" as never })).rejects.toMatchObject({
      code: "CONFIG_INVALID",
    });
    await expect(runner({ ...base, modelPath: join(dir, "missing.onnx") })).rejects.toMatchObject({
      code: "MODEL_NOT_FOUND",
    });
    await expect(runner({ ...base, modelPath: embeddingFiles.tokenizerPath })).rejects.toMatchObject({
      code: "MODEL_LOAD_FAILED",
    });
  });

  it("close is idempotent and later runs fail clearly", async () => {
    const r = await TextModelRunner.create(
      modelSettings({
        modelPath: embeddingFiles.modelPath,
        tokenizerPath: embeddingFiles.tokenizerPath,
      }),
    );
    await Promise.all([r.close(), r.close()]);
    await expect(r.run(["the cat"])).rejects.toMatchObject({ code: "INTERNAL" });
    expect((await r.run([""])).outcomes[0]).toMatchObject({ ok: false, code: "EMPTY_TEXT" });
  });
});
