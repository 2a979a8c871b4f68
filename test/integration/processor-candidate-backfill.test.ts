import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { modelSettings } from "../../src/config/model-settings.js";
import { MODEL_VERSION_HEADER, RUN_ID_HEADER } from "../../src/contracts/lane.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { isShadowed } from "../../src/delivery/shadow-agreement.js";
import { type SluiceEventMap, SluiceEvents } from "../../src/events/sluice-events.js";
import { ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { ModelSet } from "../../src/model/model-set.js";
import { ModelSwitch } from "../../src/processor/model-switch.js";
import { produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import { lanesLayout } from "../support/lanes-layout.js";
import { layoutOptions, processorLayout } from "../support/processor-layout.js";
import { decodeResults, readCommitted } from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";
import { createTinyCandidate } from "../support/tiny-candidate.js";
import { createTinyModel } from "../support/tiny-onnx.js";

// A backfill run submitted with --model candidate: its rows carry the candidate's version and are
// scored by the candidate while online requests (and other runs) keep the serving model; a row naming
// a version the instance lacks is a named dead letter, never answered by another version.
describe("backfill rows of a candidate run (real Kafka, two tiny models)", () => {
  let dir: string;
  let models: ModelSet;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-candidate-backfill-"));
    const serving = await createTinyModel(join(dir, "serving"), { task: "embedding" });
    const candidate = await createTinyCandidate(join(dir, "candidate"));
    const settings = (m: typeof serving, name: string) =>
      modelSettings({ modelPath: m.modelPath, tokenizerPath: m.tokenizerPath, name, workers: 1 });
    models = await ModelSet.load(settings(serving, "tiny"), settings(candidate, "tiny-candidate"));
  });

  afterAll(async () => {
    await models?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("scores candidate rows with the candidate, the rest with the serving model, exactly once", async () => {
    const kafka = testKafka();
    const base = uniqueName("cand-bf");
    const { topics, online, backfill, runsTopic } = await lanesLayout(kafka, base);
    const servingVersion = models.serving.model.identity.version;
    const candidateVersion = models.candidate?.model.identity.version as string;
    const row = (id: string, headers: Record<string, string>) => ({
      key: id,
      ...encodeRequest({ id, text: "the cat sat on the mat" }, "json"),
      headers: { "content-type": "application/json", ...headers },
    });
    const n = 40;
    await produceMessages(
      backfill,
      [
        ...Array.from({ length: n }, (_, i) =>
          row(`c-${i}`, { [RUN_ID_HEADER]: "cand", [MODEL_VERSION_HEADER]: candidateVersion }),
        ),
        ...Array.from({ length: n }, (_, i) => row(`s-${i}`, { [RUN_ID_HEADER]: "serv" })),
        row("gone", { [RUN_ID_HEADER]: "old", [MODEL_VERSION_HEADER]: "0123456789ab" }),
      ],
      { kafka },
    );
    await produceMessages(
      online,
      Array.from({ length: n }, (_, i) => row(`o-${i}`, {})),
      { kafka },
    );
    const events = new SluiceEvents();
    const outcomes = countOutcomes(events);
    const processor = createStreamProcessor({
      kafka,
      model: models.serving.model,
      router: new ModelSwitch(models),
      events,
      ...layoutOptions(topics),
      backfillTopics: [backfill],
      runsTopic,
      maxBatchSize: 8,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();
    const results = await readCommitted(topics.results, {
      expected: 3 * n,
      timeoutMs: 90_000,
    });
    const deadLetters = await readCommitted(topics.deadLetters, { expected: 1 });
    await processor.close();

    const decoded = decodeResults(results);
    expect(new Set(decoded.map((r) => r.id)).size).toBe(3 * n);
    expect(decoded).toHaveLength(3 * n);
    for (const r of decoded) {
      const expected = r.id.startsWith("c-") ? candidateVersion : servingVersion;
      expect(r.model.version, r.id).toBe(expected);
      expect(r.status, r.id).toBe("ok");
    }
    const candidateVector = decoded.find((r) => r.id === "c-0")?.output;
    const servingVector = decoded.find((r) => r.id === "s-0")?.output;
    expect(JSON.stringify(candidateVector)).not.toBe(JSON.stringify(servingVector));
    expect(deadLetters).toHaveLength(1);
    const h = deadLetters[0]?.headers ?? {};
    expect(String(h["sluice.error.code"])).toBe("MODEL_VERSION_UNAVAILABLE");
    expect(String(h["sluice.error.message"])).toContain("0123456789ab");
    expect(outcomes).toEqual({ result: 3 * n, dead_letter: 1, duplicate: 0 });
  });

  it("shadows a share of online requests with the candidate, to the shadow topic only, once each", async () => {
    const kafka = testKafka();
    const base = uniqueName("shadow");
    const topics = processorLayout(base, { partitions: 2 });
    const shadowTopic = `${base}.shadow`;
    await ensureTopics(kafka, { ...topics, shadowResults: shadowTopic });
    const candidate = models.candidate?.model as NonNullable<typeof models.candidate>["model"];
    const n = 200;
    const ids = Array.from({ length: n }, (_, i) => `o-${i}`);
    await produceMessages(
      topics.requests[0] as string,
      ids.map((id) => ({ key: id, ...encodeRequest({ id, text: "a dog sat on the cat" }, "json") })),
      { kafka },
    );
    const events = new SluiceEvents();
    const scored: SluiceEventMap["shadow.scored"][] = [];
    events.on("shadow.scored", (e) => scored.push(e));
    const processor = createStreamProcessor({
      kafka,
      model: models.serving.model,
      router: new ModelSwitch(models),
      shadow: { candidate, share: 0.3, topic: shadowTopic },
      events,
      ...layoutOptions(topics),
      maxBatchSize: 8,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();
    const picked = ids.filter((id) => isShadowed(id, 0.3));
    const results = await readCommitted(topics.results, { expected: n, timeoutMs: 90_000 });
    const shadows = await readCommitted(shadowTopic, {
      expected: picked.length,
      timeoutMs: 60_000,
    });
    await processor.close();
    const decodedResults = decodeResults(results);
    expect(decodedResults).toHaveLength(n);
    expect(decodedResults.every((r) => r.model.version === models.serving.model.identity.version)).toBe(true);
    const decodedShadows = decodeResults(shadows);
    expect(decodedShadows.map((r) => r.id).sort()).toEqual([...picked].sort());
    expect(
      decodedShadows.every((r) => r.model.version === candidate.identity.version && r.status === "ok"),
    ).toBe(true);
    // Same dimensions: compared by cosine; both models' latency per item measured.
    expect(scored).toHaveLength(picked.length);
    expect(scored.every((e) => e.agreement?.measure === "cosine" && e.agreement.value < 1)).toBe(true);
    expect(scored.every((e) => e.candidate.msPerItem > 0 && e.online.msPerItem > 0)).toBe(true);
  });
});
