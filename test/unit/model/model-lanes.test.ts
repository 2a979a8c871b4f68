import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelSettings } from "../../../src/config/model-settings.js";
import { sliceSubBatches } from "../../../src/model/batch-planner.js";
import { TextModelRunner } from "../../../src/model/text-model-runner.js";
import { resolveWorkerCount } from "../../../src/model/worker-count.js";
import { createTinyModel } from "../../support/tiny-onnx.js";

let dir: string;
let model: TextModelRunner;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-lanes-"));
  const files = await createTinyModel(dir, { task: "classification" });
  model = await TextModelRunner.create(
    modelSettings({
      modelPath: files.modelPath,
      tokenizerPath: files.tokenizerPath,
      task: "classification",
      labels: files.labels,
      workers: 1,
      backfillSliceRows: 1,
    }),
  );
});

afterAll(async () => {
  await model?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("lanes in the model runner", () => {
  it("an online call queued behind a backfill batch runs before the backfill slices not yet started", async () => {
    const order: string[] = [];
    const backfillTexts = Array.from({ length: 40 }, (_, i) => `good movie ${i}`);
    const backfill = model.run(backfillTexts, { lane: "backfill" }).then((r) => {
      order.push("backfill");
      return r;
    });
    const online = model.run(["bad movie"], { lane: "online" }).then((r) => {
      order.push("online");
      return r;
    });
    const [b, o] = await Promise.all([backfill, online]);
    expect(order).toEqual(["online", "backfill"]);
    // Same numbers whatever the lane and slicing (float model: batch invariant).
    expect(b.outcomes).toHaveLength(40);
    expect(b.outcomes.every((x) => x.ok)).toBe(true);
    const alone = await model.run([backfillTexts[7]]);
    const sliced = b.outcomes[7];
    expect(sliced?.ok && alone.outcomes[0]?.ok).toBe(true);
    if (sliced?.ok && alone.outcomes[0]?.ok) {
      for (const [label, score] of Object.entries(sliced.output.scores ?? {}))
        expect(score).toBeCloseTo(alone.outcomes[0].output.scores?.[label] ?? Number.NaN, 6);
    }
    expect(o.outcomes[0]?.ok).toBe(true);
  });

  it("the SLO guard's limits: backfill calls wait while paused, online calls do not; a duty cycle spaces them", async () => {
    model.limitBackfill({
      workerShare: 0,
      workerDepth: 0,
      sliceShare: 0,
      cpuCores: Number.POSITIVE_INFINITY,
    });
    let backfillDone = false;
    const backfill = model
      .run(["good movie a", "good movie b", "good movie c"], { lane: "backfill" })
      .then((r) => {
        backfillDone = true;
        return r;
      });
    const online = await model.run(["bad movie"], { lane: "online" });
    expect(online.outcomes[0]?.ok).toBe(true);
    await new Promise((r) => setTimeout(r, 200));
    expect(backfillDone).toBe(false);
    // Released: the held calls run.
    model.limitBackfill({
      workerShare: 1,
      workerDepth: 2,
      sliceShare: 1,
      cpuCores: Number.POSITIVE_INFINITY,
    });
    expect((await backfill).outcomes.every((x) => x.ok)).toBe(true);

    // Share 0.5: after each backfill call of d ms the worker waits d ms before the next one, so the
    // batch's wall time is about twice the model time its 20 one-row calls (backfillSliceRows 1) used.
    // The bound reads the calls' own thread CPU (one intra-op thread: CPU ≤ each call's wall time), so
    // a machine busy with other work lengthens the calls and their gaps alike and cannot fail it.
    model.limitBackfill({
      workerShare: 0.5,
      workerDepth: 1,
      sliceShare: 1,
      cpuCores: Number.POSITIVE_INFINITY,
    });
    const texts = Array.from({ length: 20 }, (_, i) => `a rather longer backfill text number ${i} to score`);
    const started = performance.now();
    const spaced = await model.run(texts, { lane: "backfill" });
    const wallMs = performance.now() - started;
    model.limitBackfill({
      workerShare: 1,
      workerDepth: 2,
      sliceShare: 1,
      cpuCores: Number.POSITIVE_INFINITY,
    });
    expect(spaced.outcomes.every((x) => x.ok)).toBe(true);
    const callsCpuMs = spaced.stats.cpuMs ?? 0;
    expect(callsCpuMs).toBeGreaterThan(0);
    // 20 calls and 19 gaps each as long as the call before it: ≥ 1.95 × the calls' time; 1.5 leaves
    // room for CPU read a little after each call's end.
    expect(wallMs).toBeGreaterThanOrEqual(1.5 * callsCpuMs);
  });

  it("slices backfill sub-batches to at most backfillSliceRows rows, each padded to its own longest", () => {
    const lengths = [3, 5, 4, 9, 2];
    const plan = [{ indices: [0, 1, 2, 3, 4], seqLen: 9, realTokens: 23 }];
    expect(sliceSubBatches(plan, lengths, 2)).toEqual([
      { indices: [0, 1], seqLen: 5, realTokens: 8 },
      { indices: [2, 3], seqLen: 9, realTokens: 13 },
      { indices: [4], seqLen: 2, realTokens: 2 },
    ]);
  });

  it("model.workers auto: available cores − 1, at least 1; numbers stay as given", () => {
    expect(resolveWorkerCount("auto", 8)).toBe(7);
    expect(resolveWorkerCount("auto", 2)).toBe(1);
    expect(resolveWorkerCount("auto", 1)).toBe(1);
    expect(resolveWorkerCount(3, 8)).toBe(3);
  });
});
