import { readFile } from "node:fs/promises";
import type { ModelSettings } from "../config/model-settings.js";
import type { ModelBackfillLimits } from "../contracts/backfill-limits.js";
import type { ModelIdentity } from "../contracts/inference.js";
import type { Lane } from "../contracts/lane.js";
import { SluiceError } from "../sluice-error.js";
import { InferenceWorkerPool } from "./inference-worker-pool.js";
import { fingerprintModel } from "./model-fingerprint.js";
import type { ItemOutcome, ModelCallStats, ModelPort, ModelRunOptions, ModelWorkers } from "./model-port.js";
import { readOnnxSummary } from "./onnx-metadata.js";
import { applyOnnxruntimeTelemetry } from "./onnxruntime-telemetry.js";
import { type RowRequest, splitOutputs, stackFeeds, stackGroups } from "./tensor-batch.js";
import { checkRequest, readTensorSignature, type TensorSignature } from "./tensor-signature.js";
import type { ThreadCpuSource } from "./thread-cpu-clock.js";
import { unwrapZipMaps, type ZipMapUnwrap } from "./zipmap-unwrap.js";

/** What a loaded tensor model is: `TensorModelRunner.description`, printed by `sluice model info`. */
export interface TensorModelDescription {
  identity: ModelIdentity;
  task: "tensor";
  modelSha256: string;
  signature: TensorSignature;
  /** The graph quantizes activations per tensor, so batch neighbours change a request's output. */
  batchDependent: boolean;
  /** Effective: each request runs in its own ORT call (`model.itemIsolation`); otherwise requests stack. */
  isolateItems: boolean;
  /** Most rows one request may carry (`batching.maxBatchSize`). */
  maxRequestRows: number;
}

/**
 * `ModelPort` for `model.task: tensor`: any ONNX model fed named tensors (V2 requests), no tokenizer.
 * Each request is checked against the graph's signature first (a misfit is its own dead letter);
 * the rest are stacked along the batch dimension into one ORT call per stackable group, and the
 * outputs split back per request. A failed stacked call is retried request by request, so one bad
 * request never fails its neighbours.
 */
export class TensorModelRunner implements ModelPort {
  readonly identity: ModelIdentity;
  readonly task = "tensor" as const;

  private constructor(
    readonly description: TensorModelDescription,
    private readonly pool: InferenceWorkerPool,
    private readonly backfillSliceRows: number,
  ) {
    this.identity = description.identity;
  }

  /** How `stats.cpuMs` is measured (src/model/thread-cpu-clock.ts). */
  get cpuSource(): ThreadCpuSource {
    return this.pool.cpuSource;
  }

  get workers(): ModelWorkers {
    return this.pool.size;
  }

  static async create(o: ModelSettings): Promise<TensorModelRunner> {
    let modelBytes: Buffer;
    try {
      modelBytes = await readFile(o.modelPath);
    } catch (cause) {
      throw new SluiceError("MODEL_NOT_FOUND", `cannot read model ${o.modelPath}: ${String(cause)}`, {
        cause,
      });
    }
    let opTypes: Set<string>;
    let zipMaps: ZipMapUnwrap;
    try {
      opTypes = readOnnxSummary(modelBytes).opTypes;
      zipMaps = unwrapZipMaps(modelBytes);
    } catch (cause) {
      throw new SluiceError("MODEL_LOAD_FAILED", `${o.modelPath}: ${String(cause)}`, { cause });
    }
    // The version is the model file's, not the rewritten graph's.
    const fingerprint = fingerprintModel(modelBytes, new Uint8Array());
    applyOnnxruntimeTelemetry(o.onnxruntimeTelemetry);
    const pool = await InferenceWorkerPool.startFor(
      o,
      zipMaps.unwrapped.length > 0 ? zipMaps.bytes : undefined,
    );
    try {
      const batchDependent = opTypes.has("DynamicQuantizeLinear");
      const description: TensorModelDescription = {
        identity: { name: o.name, version: fingerprint.version },
        task: "tensor",
        modelSha256: fingerprint.modelSha256,
        signature: readTensorSignature(
          pool.inputs,
          pool.outputs,
          o.modelPath,
          new Map(zipMaps.unwrapped.map((z) => [z.output, z.labels])),
        ),
        batchDependent,
        isolateItems: o.itemIsolation === "always" || (o.itemIsolation === "auto" && batchDependent),
        maxRequestRows: o.maxRequestRows,
      };
      return new TensorModelRunner(description, pool, o.backfillSliceRows);
    } catch (error) {
      await pool.close();
      throw error;
    }
  }

  /** Token-bounded batching counts one per request: a tensor request has no tokens. */
  countTokens(_text: string): number {
    return 1;
  }

  async run(
    items: readonly unknown[],
    options: ModelRunOptions = {},
  ): Promise<{ outcomes: ItemOutcome[]; stats: ModelCallStats }> {
    const started = performance.now();
    const { signature, maxRequestRows } = this.description;
    const checked = items.map((item) => checkRequest(signature, item, maxRequestRows));
    const outcomes: ItemOutcome[] = checked.map((c) => (c.ok ? PENDING : c));
    const valid: RowRequest[] = [];
    checked.forEach((c, index) => {
      if (c.ok) valid.push({ index, rows: c.rows, inputs: c.inputs, outputs: c.outputs });
    });
    const lane = options.lane ?? "online";
    const groups = stackGroups(valid, this.description.isolateItems);
    // Backfill calls are cut so an online call never waits behind a long one (docs/lanes.md).
    const calls =
      lane === "backfill" ? groups.flatMap((g) => sliceByRows(g, this.backfillSliceRows)) : groups;
    const cpu = { ms: 0 };
    await Promise.all(calls.map((group) => this.runGroup(group, outcomes, lane, cpu)));
    const rows = valid.reduce((n, r) => n + r.rows, 0);
    return {
      outcomes,
      stats: {
        inferenceMs: performance.now() - started,
        realTokens: rows,
        paddedTokens: rows,
        cpuMs: cpu.ms,
      },
    };
  }

  /**
   * The SLO guard's levers on backfill calls (docs/lanes.md): the duty cycle and depth in the pool;
   * slices stay row-bounded here (`model.backfillSliceRows`), so `sliceShare` does not apply.
   */
  limitBackfill(limits: ModelBackfillLimits): void {
    this.pool.limitBackfill(limits);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async runGroup(
    group: RowRequest[],
    outcomes: ItemOutcome[],
    lane: Lane,
    cpu: { ms: number },
  ): Promise<void> {
    const sig = this.description.signature;
    let split: ReturnType<typeof splitOutputs>;
    try {
      const result = await this.pool.runFeeds(
        { feeds: stackFeeds(sig, group), outputNames: sig.outputs.map((o) => o.name) },
        lane,
      );
      cpu.ms += result.cpuMs;
      split = splitOutputs(sig, result.outputs, group);
    } catch (error) {
      if (!(error instanceof SluiceError) || error.code !== "INFERENCE_FAILED") throw error;
      split = error.message;
    }
    if (typeof split === "string") {
      if (group.length === 1) {
        outcomes[group[0]!.index] = { ok: false, code: "INFERENCE_FAILED", message: split };
        return;
      }
      // One bad request must not fail its neighbours: run each alone to find it.
      await Promise.all(group.map((r) => this.runGroup([r], outcomes, lane, cpu)));
      return;
    }
    group.forEach((r, g) => {
      outcomes[r.index] = { ok: true, output: { tensors: split[g]! }, tokens: r.rows, truncated: false };
    });
  }
}

/** Placeholder until the request's call answers (every one does: a result or INFERENCE_FAILED). */
const PENDING: ItemOutcome = {
  ok: false,
  code: "INFERENCE_FAILED",
  message: "request was not run; this is a bug",
};

/** Consecutive runs of requests with at most `maxRows` rows each (a bigger request runs alone). */
function sliceByRows(group: RowRequest[], maxRows: number): RowRequest[][] {
  const out: RowRequest[][] = [];
  let current: RowRequest[] = [];
  let rows = 0;
  for (const r of group) {
    if (current.length > 0 && rows + r.rows > maxRows) {
      out.push(current);
      current = [];
      rows = 0;
    }
    current.push(r);
    rows += r.rows;
  }
  if (current.length > 0) out.push(current);
  return out;
}
