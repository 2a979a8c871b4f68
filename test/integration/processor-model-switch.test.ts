import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelStatus, promoteModel, rollbackModel } from "../../src/app/model-control-runtime.js";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { sluiceConfigSchema } from "../../src/config/config-schema.js";
import { modelSettings } from "../../src/config/model-settings.js";
import type { ModelBoundary } from "../../src/contracts/model-control.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { ModelControlFeed } from "../../src/kafka/runs/model-control-feed.js";
import { ModelControlStore } from "../../src/kafka/runs/model-control-store.js";
import { ModelSet } from "../../src/model/model-set.js";
import { ModelSwitch, type VersionedModels } from "../../src/processor/model-switch.js";
import type { StreamProcessor } from "../../src/processor/stream-processor.js";
import { produceMessages, testBrokers, testKafka, uniqueName } from "../support/kafka-harness.js";
import { layoutOptions, processorLayout } from "../support/processor-layout.js";
import { decodeResults, readCommitted } from "../support/serve-process.js";
import { createTinyCandidate } from "../support/tiny-candidate.js";
import { createTinyModel, type TinyModel } from "../support/tiny-onnx.js";

// Two processors of one group, a candidate beside the serving model, real Kafka: promote while
// requests flow, replace one member (stopped, a new one joins and restores), roll back. Per partition
// each decision has exactly one boundary; every request below it is answered by the version before,
// every request from it on by the decided one; every id exactly once.
describe("model promote and rollback at recorded boundaries (real Kafka, two tiny models)", () => {
  let dir: string;
  let serving: TinyModel;
  let candidate: TinyModel;
  let models: ModelSet;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-model-switch-"));
    serving = await createTinyModel(join(dir, "serving"), { task: "embedding" });
    candidate = await createTinyCandidate(join(dir, "candidate"));
    const settings = (m: TinyModel, name: string) =>
      modelSettings({
        modelPath: m.modelPath,
        tokenizerPath: m.tokenizerPath,
        name,
        workers: 1,
        maxSequenceTokens: 32,
      });
    models = await ModelSet.load(settings(serving, "tiny"), settings(candidate, "tiny-candidate"));
  });

  afterAll(async () => {
    await models?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("switches each partition once per decision, by offset, exactly once, across a member change", async () => {
    const kafka = testKafka();
    const base = uniqueName("switch");
    const layout = processorLayout(base, { partitions: 4 });
    const controlTopic = `${base}.control`;
    await ensureTopics(kafka, layout);
    await new ModelControlStore({ kafka, topic: controlTopic, replicationFactor: 1 }).ensureTopic();
    const config = sluiceConfigSchema.parse({
      kafka: { brokers: testBrokers() },
      topics: { requests: layout.requests, modelControl: controlTopic },
      consumer: { groupId: layout.groupId },
      model: { name: "tiny", path: serving.modelPath, tokenizerPath: serving.tokenizerPath },
      candidate: {
        name: "tiny-candidate",
        path: candidate.modelPath,
        tokenizerPath: candidate.tokenizerPath,
      },
    });
    const a = models.serving.model.identity.version;
    const b = models.candidate?.model.identity.version as string;

    const start = (instanceId: string) => startMember(kafka, layout, controlTopic, models, instanceId);

    let sent = 0;
    const send = async (n: number) => {
      const messages = Array.from({ length: n }, () => {
        const id = `r-${sent++}`;
        return { key: id, ...encodeRequest({ id, text: "the cat sat on the mat" }, "json") };
      });
      await produceMessages(layout.requests[0] as string, messages, { kafka });
    };
    let flowing = true;
    const traffic = (async () => {
      while (flowing) {
        await send(10);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const one = await start("one");
    const two = await start("two");
    await new Promise((r) => setTimeout(r, 2000));
    const promoted = await promoteModel(config, { timeoutMs: 60_000 });
    expect(promoted.decision).toMatchObject({ seq: 1, version: b, previousVersion: a });
    expect(promoted.boundaries).toHaveLength(4);
    // Replace a member under load: its partitions move, the newcomer restores them with the decision.
    await two.close();
    const three = await start("three");
    await new Promise((r) => setTimeout(r, 3000));
    const rolledBack = await rollbackModel(config, { timeoutMs: 60_000 });
    expect(rolledBack.decision).toMatchObject({ seq: 2, version: a, previousVersion: b, action: "rollback" });
    await new Promise((r) => setTimeout(r, 1000));
    flowing = false;
    await traffic;
    const results = await readCommitted(layout.results, {
      expected: sent,
      timeoutMs: 90_000,
    });
    await Promise.all([one.close(), three.close()]);

    const status = await modelStatus(config);
    expect(status.online).toEqual({ version: a, source: "decision" });
    expect(status.decisions.map((d) => d.action)).toEqual(["promote", "rollback"]);
    expect(status.pending).toBe(0);

    const store = new ModelControlStore({ kafka, topic: controlTopic, replicationFactor: 1 });
    const state = await store.read(layout.groupId);
    const decoded = decodeResults(results);
    expect(decoded).toHaveLength(sent);
    expect(new Set(decoded.map((r) => r.id)).size).toBe(sent);
    for (let p = 0; p < 4; p++) {
      const list = state.boundaries.get(`${layout.requests[0]}:${p}`) as ModelBoundary[];
      // One boundary per decision per partition.
      expect(list.map((x) => x.seq)).toEqual([1, 2]);
      const versionAt = (offset: bigint) => {
        let v = a;
        for (const x of list) if (BigInt(x.offset) <= offset) v = x.version;
        return v;
      };
      const here = decoded.filter((r) => r.source.partition === p);
      expect(here.length).toBeGreaterThan(0);
      for (const r of here)
        expect(r.model.version, `${r.id} @${p}:${r.source.offset}`).toBe(versionAt(BigInt(r.source.offset)));
      // Both versions answered some of this partition's requests.
      expect(new Set(here.map((r) => r.model.version))).toEqual(new Set([a, b]));
    }
  });

  it("a member without the decided version refuses online with a named error, never another version", async () => {
    const kafka = testKafka();
    const base = uniqueName("refuse");
    const layout = processorLayout(base, { partitions: 2 });
    const controlTopic = `${base}.control`;
    await ensureTopics(kafka, layout);
    const store = new ModelControlStore({ kafka, topic: controlTopic, replicationFactor: 1 });
    await store.ensureTopic();
    const a = models.serving.model.identity.version;
    const b = models.candidate?.model.identity.version as string;
    // The group decided for the candidate before this member starts; it has only the serving model.
    await store.writeDecision({
      kind: "sluice.model-decision",
      groupId: layout.groupId,
      seq: 1,
      action: "promote",
      version: b,
      previousVersion: a,
      decidedAt: new Date().toISOString(),
    });
    const onlyServing = {
      serving: models.serving,
      byVersion: (v: string) => (v === a ? models.serving.model : undefined),
      versions: () => [a],
    };
    const lacking = await startMember(kafka, layout, controlTopic, onlyServing, "lacking");
    const processor = lacking.processor;
    const ids = Array.from({ length: 20 }, (_, i) => `x-${i}`);
    await produceMessages(
      layout.requests[0] as string,
      ids.map((id) => ({ key: id, ...encodeRequest({ id, text: "the cat" }, "json") })),
      { kafka },
    );
    let readiness = processor.readiness();
    for (let i = 0; i < 100 && !/MODEL_VERSION_UNAVAILABLE/.test(readiness.reason ?? ""); i++) {
      await new Promise((r) => setTimeout(r, 100));
      readiness = processor.readiness();
    }
    expect(readiness.ready).toBe(false);
    expect(readiness.reason).toMatch(new RegExp(`MODEL_VERSION_UNAVAILABLE: .*${b}.*candidate\\.path`));
    // Nothing answered: not by the serving model, not at all (read to the end offsets once the
    // member is closed, so nothing it could still commit is missed).
    await lacking.close();
    expect(await readCommitted(layout.results, { expected: 0 })).toHaveLength(0);
    // A member that has the candidate takes over and answers every request once, with it.
    const full = await startMember(kafka, layout, controlTopic, models, "full");
    const results = decodeResults(await readCommitted(layout.results, { expected: ids.length }));
    await full.close();
    expect(results.map((r) => r.id).sort()).toEqual([...ids].sort());
    expect(new Set(results.map((r) => r.model.version))).toEqual(new Set([b]));
    const state = await store.read(layout.groupId);
    for (let p = 0; p < 2; p++)
      expect(state.boundaries.get(`${layout.requests[0]}:${p}`)?.map((x) => [x.seq, x.instanceId])).toEqual([
        [1, "full"],
      ]);
  });
});

/** One member of the group in this process: its control feed, its switch and its processor, started. */
async function startMember(
  kafka: ReturnType<typeof testKafka>,
  layout: ReturnType<typeof processorLayout>,
  controlTopic: string,
  models: VersionedModels,
  instanceId: string,
): Promise<{ processor: StreamProcessor; close(): Promise<void> }> {
  const feed = new ModelControlFeed({
    kafka,
    topic: controlTopic,
    groupId: layout.groupId,
    startTimeoutMs: 30_000,
  });
  await feed.start();
  const sw = new ModelSwitch(models, {
    groupId: layout.groupId,
    instanceId,
    controlTopic,
    decision: () => feed.decision(),
  });
  feed.onDecision((d) => sw.onDecision(d));
  const processor = createStreamProcessor({
    kafka,
    model: models.serving.model,
    router: sw,
    events: new SluiceEvents(),
    ...layoutOptions(layout),
    maxBatchSize: 8,
    commitIntervalMs: 50,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 500,
  });
  await processor.start();
  return {
    processor,
    close: async () => {
      await processor.close();
      await feed.stop();
    },
  };
}
