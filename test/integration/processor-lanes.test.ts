import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { RUN_ID_HEADER } from "../../src/contracts/lane.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { decodeRunCostShare, type RunCostShare } from "../../src/contracts/run-cost-share.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import type { TextModelRunner } from "../../src/model/text-model-runner.js";
import { sumRunCostShares } from "../../src/runs/run-cost-total.js";
import { produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import { lanesLayout } from "../support/lanes-layout.js";
import { layoutOptions } from "../support/processor-layout.js";
import { decodeResults, readCommitted } from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";
import { startTinyClassifier } from "../support/tiny-classifier.js";
import { TINY_POISON_WORD } from "../support/tiny-onnx.js";

const RULES = `
rules:
  - name: bad words
    keywords: [awful, bad]
    label: negative
    scores: { negative: 0.8, neutral: 0.1, positive: 0.1 }
default:
  label: neutral
  scores: { negative: 0.2, neutral: 0.6, positive: 0.2 }
`;

// One instance, two lanes and fallback rules, against the real broker with the tiny classifier: every
// consumed record ends as exactly one result (online: ok or fallback with a reason; backfill: ok with
// its runId), nothing is dead-lettered because the rules answer model failures.
describe("StreamProcessor lanes and fallback (real Kafka, tiny classifier)", () => {
  let dir: string;
  let model: TextModelRunner;
  let rulesPath: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-lanes-"));
    model = await startTinyClassifier(dir);
    rulesPath = join(dir, "rules.yaml");
    await writeFile(rulesPath, RULES);
  });

  afterAll(async () => {
    await model?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("online requests end ok or fallback (deadline, model_error, overload), backfill rows ok with runId", async () => {
    const kafka = testKafka();
    const base = uniqueName("lanes");
    // One partition per topic: the poison request is read before the burst.
    const { topics, online, backfill, runsTopic } = await lanesLayout(kafka, base);

    const rows = 200;
    await produceMessages(
      backfill,
      Array.from({ length: rows }, (_, i) => ({
        key: `b-${i}`,
        ...encodeRequest({ id: `b-${i}`, text: i % 2 ? "a good movie" : "the cat sat" }, "json"),
        headers: { "content-type": "application/json", [RUN_ID_HEADER]: "run-1" },
      })),
      { kafka },
    );
    const burst = 80;
    const messages = Array.from({ length: burst }, (_, i) => ({
      key: `o-${i}`,
      ...encodeRequest({ id: `o-${i}`, text: i % 3 ? "an awful movie" : "a good movie" }, "json"),
    }));
    messages.push({
      key: "late",
      ...encodeRequest({ id: "late", text: "bad", deadlineMs: Date.now() - 1 }, "json"),
    });
    // The poison request goes first, so it is held (not overloaded) and reaches the model.
    messages.unshift({
      key: "poison",
      ...encodeRequest({ id: "poison", text: `the ${TINY_POISON_WORD} cat` }, "json"),
    });
    await produceMessages(online, messages, { kafka });

    const events = new SluiceEvents();
    const outcomes = countOutcomes(events);
    const fallbacks = new Map<string, number>();
    events.on("record.outcome", (e) => {
      if (e.fallbackReason) fallbacks.set(e.fallbackReason, (fallbacks.get(e.fallbackReason) ?? 0) + 1);
    });
    const processor = createStreamProcessor({
      kafka,
      model,
      events,
      ...layoutOptions(topics),
      backfillTopics: [backfill],
      runsTopic,
      fallbackRulesPath: rulesPath,
      fallbackMaxOnlineQueue: 8,
      maxBatchSize: 4,
      maxInFlightBatches: 1,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();
    const total = rows + burst + 2;
    const results = await readCommitted(topics.results, {
      expected: total,
      timeoutMs: 90_000,
      stopWriters: () => processor.close(),
    });
    const deadLetters = await readCommitted(topics.deadLetters, { expected: 0 });
    // The backfill rows' model cost, reported per transaction on the runs topic: every row once.
    const shares = (await readCommitted(runsTopic, { expected: 1 })).map((m) => decodeRunCostShare(m.value));
    expect(shares.every((s) => s !== null && s.topic === backfill)).toBe(true);
    const cost = sumRunCostShares("run-1", shares as RunCostShare[]);
    expect(cost.items).toBe(rows);
    expect(cost.tokens).toBeGreaterThan(rows);
    expect(cost.modelCpuMs).toBeGreaterThan(0);

    const decoded = decodeResults(results);
    const ids = decoded.map((r) => r.id);
    expect(ids.length).toBe(total);
    expect(new Set(ids).size).toBe(total); // exactly once
    expect(deadLetters).toHaveLength(0);
    expect(outcomes).toEqual({ result: total, dead_letter: 0, duplicate: 0 });

    const byId = new Map(decoded.map((r) => [r.id, r]));
    for (let i = 0; i < rows; i++) {
      const r = byId.get(`b-${i}`);
      expect(r?.status, `b-${i}`).toBe("ok");
      expect(r?.runId).toBe("run-1");
      expect(r?.source.topic).toBe(backfill);
    }
    expect(byId.get("late")).toMatchObject({
      status: "fallback",
      fallbackReason: "deadline",
      output: { label: "negative", scores: { negative: 0.8, neutral: 0.1, positive: 0.1 } },
    });
    expect(byId.get("poison")).toMatchObject({
      status: "fallback",
      fallbackReason: "model_error",
      output: { label: "neutral" },
    });
    const onlineResults = decoded.filter((r) => r.source.topic === online);
    for (const r of onlineResults) expect(["ok", "fallback"]).toContain(r.status);
    const overloaded = onlineResults.filter((r) => r.fallbackReason === "overload");
    // The burst arrives in one fetch while at most 8 online requests may be held.
    expect(overloaded.length).toBeGreaterThan(0);
    for (const r of overloaded) {
      expect(r.output?.label).toBe(
        r.id.startsWith("o-") && Number(r.id.slice(2)) % 3 ? "negative" : "neutral",
      );
      expect(r.timing.inferenceMs).toBe(0);
    }
    expect(onlineResults.filter((r) => r.status === "ok").length).toBeGreaterThan(0);
    expect(fallbacks.get("overload")).toBe(overloaded.length);
    expect(fallbacks.get("deadline")).toBe(1);
    expect(fallbacks.get("model_error")).toBe(1);
  }, 120_000);
});
