import { readFile } from "node:fs/promises";
import type { ModelSettings } from "../config/model-settings.js";
import type { ModelBackfillLimits } from "../contracts/backfill-limits.js";
import type { ModelIdentity } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";
import { SluiceError } from "../sluice-error.js";
import { padSequences, planSubBatches, sliceSubBatches } from "./batch-planner.js";
import { InferenceWorkerPool } from "./inference-worker-pool.js";
import type { ModelDescription } from "./model-description.js";
import { fingerprintModel, type ModelFingerprint } from "./model-fingerprint.js";
import type {
  ItemOutcome,
  ModelCallStats,
  ModelPort,
  ModelRunOptions,
  ModelTask,
  ModelWorkers,
} from "./model-port.js";
import { type OnnxSummary, readOnnxSummary } from "./onnx-metadata.js";
import { applyOnnxruntimeTelemetry } from "./onnxruntime-telemetry.js";
import { classificationOutput, labelsFromMetadata } from "./tasks/classification-task.js";
import { embeddingOutput } from "./tasks/embedding-task.js";
import { TextTokenizer } from "./text-tokenizer.js";
import type { ThreadCpuSource } from "./thread-cpu-clock.js";
import type { FeedNames } from "./worker-protocol.js";

interface TokenizedItem {
  index: number;
  ids: Int32Array;
  truncated: boolean;
}

/**
 * `ModelPort` over onnxruntime-node: tokenises on the caller's thread (cheap, and `countTokens` needs
 * the same tokenizer), pads each batch dynamically, optionally splits it into length buckets, and runs
 * ORT in worker threads. Outcomes always come back in input order, one per item.
 */
export class TextModelRunner implements ModelPort {
  readonly identity: ModelIdentity;
  readonly task: ModelTask;
  readonly tokenizerHash: string;
  readonly description: ModelDescription;
  private readonly labels: string[];
  /** Measured ORT ms per padded token (moving average over calls; 0 before the first). */
  private msPerPaddedToken = 0;
  /** The guard's share of `backfillSliceMs` (1 = unthrottled). */
  private sliceShare = 1;

  private constructor(
    private readonly options: ModelSettings,
    private readonly tokenizer: TextTokenizer,
    private readonly pool: InferenceWorkerPool,
    description: ModelDescription,
  ) {
    this.description = description;
    this.identity = description.identity;
    this.task = options.task;
    this.tokenizerHash = description.tokenizerSha256;
    this.labels = description.labels ?? [];
  }

  /**
   * Loads the model with resolved settings: from the configuration (`modelRunnerOptionsFromConfig`,
   * every command) or `modelSettings()` (programmatic callers); both validate, this does not again.
   */
  static async create(o: ModelSettings): Promise<TextModelRunner> {
    const modelBytes = await readOrExplain(o.modelPath, "model");
    const tokenizerBytes = await readOrExplain(o.tokenizerPath, "tokenizer");
    let tokenizerJson: unknown;
    try {
      tokenizerJson = JSON.parse(tokenizerBytes.toString("utf8"));
    } catch (cause) {
      throw new SluiceError(
        "MODEL_LOAD_FAILED",
        `tokenizer ${o.tokenizerPath} is not valid JSON: ${String(cause)}`,
        {
          cause,
        },
      );
    }
    const tokenizer = new TextTokenizer(tokenizerJson, {
      maxSequenceTokens: o.maxSequenceTokens,
      textPrefix: o.textPrefix,
    });
    const fingerprint = fingerprintModel(modelBytes, tokenizerBytes);
    let summary: OnnxSummary;
    try {
      summary = readOnnxSummary(modelBytes);
    } catch (cause) {
      throw new SluiceError("MODEL_LOAD_FAILED", `${o.modelPath}: ${String(cause)}`, { cause });
    }
    // Before the first worker loads onnxruntime: it reads the switch when its environment is created.
    applyOnnxruntimeTelemetry(o.onnxruntimeTelemetry);
    const pool = await InferenceWorkerPool.startFor(o);
    try {
      const description = describe(o, pool, fingerprint, summary);
      const runner = new TextModelRunner(o, tokenizer, pool, description);
      return runner;
    } catch (error) {
      await pool.close();
      throw error;
    }
  }

  get cpuSource(): ThreadCpuSource {
    return this.pool.cpuSource;
  }

  get workers(): ModelWorkers {
    return this.pool.size;
  }

  countTokens(text: string): number {
    return this.tokenizer.countTokens(text);
  }

  async run(
    texts: readonly unknown[],
    options: ModelRunOptions = {},
  ): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }> {
    const lane = options.lane ?? "online";
    const started = performance.now();
    const outcomes = new Array<ItemOutcome>(texts.length);
    const items: TokenizedItem[] = [];
    texts.forEach((text, index) => {
      const t = this.tokenizer.tokenize(text);
      if (t.ok) items.push({ index, ids: t.ids, truncated: t.truncated });
      else outcomes[index] = { ok: false, code: t.code, message: t.message };
    });
    const lengths = items.map((i) => i.ids.length);
    const planned = this.description.isolateItems
      ? lengths.map((len, i) => ({ indices: [i], seqLen: len, realTokens: len }))
      : planSubBatches(lengths, this.options.bucketing);
    const plan =
      lane === "backfill" ? sliceSubBatches(planned, lengths, (seqLen) => this.sliceRows(seqLen)) : planned;
    let realTokens = 0;
    let paddedTokens = 0;
    const cpu = { ms: 0 };
    for (const sub of plan) {
      realTokens += sub.realTokens;
      paddedTokens += sub.seqLen * sub.indices.length;
    }
    await Promise.all(
      plan.map((sub) =>
        this.runItems(
          sub.indices.map((i) => items[i]!),
          sub.seqLen,
          outcomes,
          lane,
          cpu,
        ),
      ),
    );
    const inferenceMs = performance.now() - started;
    return { outcomes, stats: { inferenceMs, realTokens, paddedTokens, cpuMs: cpu.ms } };
  }

  /** The SLO guard's levers, as its table made them: the slice budget here, the duty cycle in the pool. */
  limitBackfill(limits: ModelBackfillLimits): void {
    this.sliceShare = limits.sliceShare;
    this.pool.limitBackfill(limits);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  /**
   * Rows per backfill slice padded to `seqLen`: as many as fit `model.backfillSliceMs` (times the
   * guard's share) at the measured time per padded token, at least 1 and at most
   * `model.backfillSliceRows`. Before the first measurement, the row cap.
   */
  private sliceRows(seqLen: number): number {
    const cap = this.options.backfillSliceRows;
    if (this.msPerPaddedToken <= 0 || seqLen <= 0) return cap;
    const budgetMs = this.options.backfillSliceMs * this.sliceShare;
    return Math.min(cap, Math.max(1, Math.floor(budgetMs / (seqLen * this.msPerPaddedToken))));
  }

  private async runItems(
    items: TokenizedItem[],
    seqLen: number,
    outcomes: ItemOutcome[],
    lane: Lane,
    cpu: { ms: number },
  ): Promise<void> {
    const { inputIds, attentionMask } = padSequences(
      items.map((i) => i.ids),
      seqLen,
    );
    let result: Awaited<ReturnType<InferenceWorkerPool["run"]>>;
    try {
      result = await this.pool.run(
        {
          rows: items.length,
          seqLen,
          inputIds,
          attentionMask,
          feedNames: this.description.feeds,
          outputName: this.description.outputName,
        },
        lane,
      );
    } catch (error) {
      if (!(error instanceof SluiceError) || error.code !== "INFERENCE_FAILED") throw error;
      if (items.length === 1) {
        const item = items[0]!;
        outcomes[item.index] = { ok: false, code: "INFERENCE_FAILED", message: error.message };
        return;
      }
      // One bad item must not fail its neighbours: retry each alone to find it.
      await Promise.all(items.map((item) => this.runItems([item], item.ids.length, outcomes, lane, cpu)));
      return;
    }
    const { data, dim } = result;
    cpu.ms += result.cpuMs;
    const perToken = result.runMs / Math.max(1, items.length * seqLen);
    this.msPerPaddedToken =
      this.msPerPaddedToken === 0 ? perToken : 0.8 * this.msPerPaddedToken + 0.2 * perToken;
    items.forEach((item, row) => {
      const slice = data.subarray(row * dim, (row + 1) * dim);
      outcomes[item.index] = {
        ok: true,
        output: this.task === "embedding" ? embeddingOutput(slice) : classificationOutput(slice, this.labels),
        tokens: item.ids.length,
        truncated: item.truncated,
      };
    });
  }
}

function describe(
  o: ModelSettings,
  pool: InferenceWorkerPool,
  fingerprint: ModelFingerprint,
  summary: OnnxSummary,
): ModelDescription {
  const inputNames = pool.inputs.map((i) => i.name);
  const outputNames = pool.outputs.map((i) => i.name);
  const require = (name: string, what: string): string => {
    if (inputNames.includes(name)) return name;
    throw new SluiceError(
      "CONFIG_INVALID",
      `model ${o.modelPath} has no input "${name}" for ${what}; its inputs are [${inputNames.join(", ")}]: ` +
        "map them with model.inputNames",
    );
  };
  const mapped = o.inputNames ?? {};
  const feeds: FeedNames = {
    inputIds: require(mapped.input_ids ?? "input_ids", "token ids"),
    attentionMask: require(mapped.attention_mask ?? "attention_mask", "the attention mask"),
    tokenTypeIds:
      mapped.token_type_ids !== undefined
        ? require(mapped.token_type_ids, "token type ids")
        : inputNames.includes("token_type_ids")
          ? "token_type_ids"
          : null,
  };
  const unmapped = inputNames.filter(
    (n) => n !== feeds.inputIds && n !== feeds.attentionMask && n !== feeds.tokenTypeIds,
  );
  if (unmapped.length > 0) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `model inputs [${unmapped.join(", ")}] cannot be fed: Sluice provides token ids, attention mask and token type ids only`,
    );
  }
  const preferred = o.task === "embedding" ? ["last_hidden_state", "sentence_embedding"] : ["logits"];
  const outputName = o.outputName ?? preferred.find((n) => outputNames.includes(n)) ?? outputNames[0];
  if (outputName === undefined || !outputNames.includes(outputName)) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `model has no output "${outputName}"; its outputs are [${outputNames.join(", ")}]: set model.outputName`,
    );
  }
  const shape = pool.outputs.find((x) => x.name === outputName)!.shape;
  const last = shape[shape.length - 1];
  const outputSize = typeof last === "number" ? last : null;
  let labels: string[] | null = null;
  if (o.task === "classification") {
    labels = o.labels ?? labelsFromMetadata(summary.metadata);
    if (labels === null && outputSize !== null)
      labels = Array.from({ length: outputSize }, (_, i) => `LABEL_${i}`);
    if (labels !== null && outputSize !== null && labels.length !== outputSize) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `${labels.length} labels given but the model outputs ${outputSize} classes; pass exactly ${outputSize} labels`,
      );
    }
  }
  const batchDependent = summary.opTypes.has("DynamicQuantizeLinear");
  return {
    identity: { name: o.name, version: fingerprint.version },
    task: o.task,
    modelSha256: fingerprint.modelSha256,
    tokenizerSha256: fingerprint.tokenizerSha256,
    inputs: pool.inputs,
    outputs: pool.outputs,
    feeds,
    outputName,
    outputSize,
    labels,
    maxSequenceTokens: o.maxSequenceTokens,
    batchDependent,
    isolateItems: o.itemIsolation === "always" || (o.itemIsolation === "auto" && batchDependent),
  };
}

/** Callers name their own knob first (`resolveModelFiles`); this is the last line of defence. */
async function readOrExplain(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (cause) {
    throw new SluiceError("MODEL_NOT_FOUND", `cannot read ${what} ${path}: ${String(cause)}`, { cause });
  }
}
