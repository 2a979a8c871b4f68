import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { modelSettings } from "../../src/config/model-settings.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { changelogTopicFor, ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { resultTransactionalId } from "../../src/kafka/write/result-publisher.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import {
  endTransaction,
  produceMessages,
  testKafka,
  transactionalProducer,
  uniqueName,
} from "../support/kafka-harness.js";
import { layoutOptions, processorLayout } from "../support/processor-layout.js";
import { jsonRequestMessages } from "../support/request-messages.js";
import { changelogIds, decodeResults, readCommitted, resultIds } from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";
import { createTinyModel, TINY_POISON_WORD } from "../support/tiny-onnx.js";

// In-process pipeline against the real broker with the tiny generated ONNX model (the real model is
// exercised by the e2e crash test); the mechanics under test are Kafka ones.
describe("StreamProcessor (real Kafka, tiny model)", () => {
  let dir: string;
  let model: TextModelRunner;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-proc-"));
    const tiny = await createTinyModel(dir, { task: "embedding" });
    model = await TextModelRunner.create(
      modelSettings({
        modelPath: tiny.modelPath,
        tokenizerPath: tiny.tokenizerPath,
        name: "tiny",
      }),
    );
  });

  afterAll(async () => {
    await model?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("turns every record into exactly one result, dead letter or counted duplicate", async () => {
    const kafka = testKafka();
    const base = uniqueName("pipe");
    const topics = processorLayout(base, { partitions: 3 });
    await ensureTopics(kafka, topics);
    const requestTopic = topics.requests[0] as string;

    const words = ["the cat sat on the mat", "a good movie", "the dog is very bad", "great", "awful movie"];
    const messages: {
      key: string | null;
      value: Buffer;
      headers?: Record<string, string>;
      timestamp?: string;
    }[] = [];
    const unique = 240;
    for (let i = 0; i < unique; i++) {
      const enc = encodeRequest(
        { id: `r-${i}`, text: words[i % words.length] as string },
        i % 2 ? "avro" : "json",
      );
      messages.push({ key: `r-${i}`, ...enc });
    }
    for (let i = 0; i < 30; i++) {
      const enc = encodeRequest({ id: `r-${i * 7}`, text: "the cat" }, "json");
      messages.push({ key: `r-${i * 7}`, ...enc }); // duplicates (same key → same partition)
    }
    messages.push({ key: "bad-1", value: Buffer.from("{not json") });
    messages.push({ key: "bad-2", value: Buffer.from(JSON.stringify({ text: "no id" })) });
    messages.push({ key: "bad-3", value: Buffer.from(JSON.stringify({ id: 5, text: "x" })) });
    messages.push({
      key: "late",
      ...encodeRequest({ id: "late", text: "the cat", deadlineMs: Date.now() - 1000 }, "json"),
    });
    messages.push({ key: "empty", ...encodeRequest({ id: "empty", text: "" }, "json") });
    // Bigger than maxMessageBytes below → PAYLOAD_TOO_LARGE dead letter.
    messages.push({ key: "huge", ...encodeRequest({ id: "huge", text: "the cat ".repeat(600) }, "json") });
    // A token the tiny model cannot embed (ORT Gather fails) → per-item INFERENCE_FAILED dead letter.
    messages.push({
      key: "poison",
      ...encodeRequest({ id: "poison", text: `the ${TINY_POISON_WORD} cat` }, "json"),
    });
    await produceMessages(requestTopic, messages, { kafka });

    const events = new SluiceEvents();
    const outcomes = countOutcomes(events);
    const flushReasons = new Set<string>();
    events.on("microbatch.flushed", (e) => flushReasons.add(e.reason));
    const processor = createStreamProcessor({
      kafka,
      model,
      events,
      ...layoutOptions(topics),
      maxBatchSize: 16,
      maxQueuedRecords: 64,
      maxMessageBytes: 2048,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();
    let readiness: unknown;
    const results = await readCommitted(topics.results, {
      expected: unique + 2,
      timeoutMs: 60_000,
      stopWriters: () => {
        readiness = processor.readiness();
        return processor.close();
      },
    });
    const deadLetters = await readCommitted(topics.deadLetters, { expected: 5 });
    expect(readiness).toEqual({ ready: true });
    await processor.close(); // idempotent

    const decoded = decodeResults(results);
    const ids = decoded.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(unique + 2);
    for (let i = 0; i < unique; i++) expect(ids).toContain(`r-${i}`);
    const byId = new Map(decoded.map((r) => [r.id, r]));
    expect(byId.get("late")?.status).toBe("expired");
    expect(byId.get("late")?.error?.code).toBe("DEADLINE_EXCEEDED");
    expect(byId.get("empty")?.status).toBe("rejected");
    const ok = byId.get("r-1");
    expect(ok?.status).toBe("ok");
    expect(ok?.output?.embedding?.length).toBe(4);
    expect(
      results.every((r) => r.key === decodeResult(r.value as Buffer, r.headers as Record<string, string>).id),
    ).toBe(true);

    expect(deadLetters).toHaveLength(5);
    const codes = deadLetters.map((d) => String(d.headers["sluice.error.code"])).sort();
    expect(codes).toEqual([
      "DECODE_FAILED",
      "INFERENCE_FAILED",
      "MISSING_ID",
      "PAYLOAD_TOO_LARGE",
      "SCHEMA_VIOLATION",
    ]);
    const poison = deadLetters.find((d) => d.key === "poison");
    expect(String(poison?.headers["sluice.error.stage"])).toBe("model");
    expect(String(poison?.headers["sluice.error.offset"])).toMatch(/^\d+$/);
    expect(deadLetters.find((d) => d.key === "bad-1")?.value?.toString()).toBe("{not json");

    expect(outcomes).toEqual({ result: unique + 2, dead_letter: 5, duplicate: 30 });
    expect(flushReasons.size).toBeGreaterThan(0);

    // The changelog holds every accepted id once, in dedup segments (read_committed; the processor
    // is closed, so the read goes to the end).
    const changelog = await readCommitted(
      changelogTopicFor(topics.dedupChangelog, topics.groupId, requestTopic),
      { expected: 1 },
    );
    const idKeys = changelogIds(changelog);
    // Every accepted id is remembered, including "poison" whose outcome was a dead letter.
    expect(idKeys).toHaveLength(unique + 3);
    expect(new Set(idKeys).size).toBe(unique + 3);
    // Far fewer records than ids: one segment per transaction, not one record per result.
    const segments = changelog.filter((c) => c.key?.startsWith("\uFFFDsluice.dedup-segment/"));
    expect(segments.length).toBeGreaterThan(0);
    expect(segments.length).toBeLessThan(unique / 2);
    // …plus the offset checkpoint record that every transaction writes.
    expect(changelog.some((c) => c.key === "\uFFFDsluice.next-offset")).toBe(true);
  }, 90_000);

  async function setup(prefix: string, partitions = 2) {
    const kafka = testKafka();
    const base = uniqueName(prefix);
    const layout = processorLayout(base, { partitions });
    await ensureTopics(kafka, layout);
    return { kafka, base, layout, requestTopic: `${base}.requests` };
  }

  async function produce(kafka: ReturnType<typeof testKafka>, topic: string, ids: string[]): Promise<void> {
    await produceMessages(topic, jsonRequestMessages(ids, "the cat sat on the mat"), { kafka });
  }

  it("pauses the consumer at maxQueuedRecords and resumes when drained", async () => {
    const { kafka, layout, requestTopic } = await setup("bp");
    const ids = Array.from({ length: 400 }, (_, i) => `bp-${i}`);
    await produce(kafka, requestTopic, ids);
    const events = new SluiceEvents();
    let paused = 0;
    let resumed = 0;
    let formedNotInferred = 0;
    let maxOverlap = 0;
    events.on("microbatch.flushed", () => {
      formedNotInferred++;
      maxOverlap = Math.max(maxOverlap, formedNotInferred);
    });
    events.on("microbatch.inferred", () => formedNotInferred--);
    events.on("consumer.paused", () => paused++);
    events.on("consumer.resumed", () => resumed++);
    const processor = createStreamProcessor({
      kafka,
      model,
      events,
      ...layoutOptions(layout),
      maxBatchSize: 8,
      maxQueuedRecords: 8,
      maxInFlightBatches: 2,
      maxBytesPerPartition: 2048, // small fetches so the bound is hit many times
      commitIntervalMs: 20,
    });
    await processor.start();
    const results = await readCommitted(layout.results, {
      expected: ids.length,
      stopWriters: () => processor.close(),
    });
    expect(resultIds(results).sort()).toEqual([...ids].sort());
    expect(paused).toBeGreaterThan(0);
    expect(resumed).toBeGreaterThan(0);
    // Pipelining: a batch was formed while an earlier one was still inferring.
    expect(maxOverlap).toBeGreaterThan(1);
  }, 60_000);

  it("recovers from being fenced: drops in-flight work, reclaims from the committed offset, no duplicates", async () => {
    const { kafka, base, layout, requestTopic } = await setup("fence", 1);
    const group = `${base}-group`;
    const events = new SluiceEvents();
    const txOutcomes: string[] = [];
    events.on("transaction.finished", (e) => txOutcomes.push(e.outcome));
    const processor = createStreamProcessor({
      kafka,
      model,
      events,
      ...layoutOptions(layout),
      commitIntervalMs: 200,
      sessionTimeoutMs: 6000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();
    const first = Array.from({ length: 50 }, (_, i) => `f-${i}`);
    await produce(kafka, requestTopic, first);
    await readCommitted(layout.results, { expected: first.length });
    // Another producer takes the partition's transactional id, as a new owner would.
    const usurper = transactionalProducer(resultTransactionalId(group, requestTopic, 0), kafka);
    await usurper.connect();
    const txn = await usurper.transaction();
    await txn.abort();
    await usurper.disconnect();
    // Includes repeats of already-answered ids: they must stay duplicates after the reclaim.
    const second = [...Array.from({ length: 50 }, (_, i) => `g-${i}`), "f-1", "f-2"];
    await produce(kafka, requestTopic, second);
    const results = await readCommitted(layout.results, {
      expected: 100,
      timeoutMs: 45_000,
      stopWriters: () => processor.close(),
    });
    expect(txOutcomes).toContain("fenced");
    const ids = resultIds(results);
    expect(ids.length).toBe(100);
    expect(new Set(ids).size).toBe(100);
  }, 60_000);

  it("reads transactional input (markers, aborted records) and resumes at a marker after restart", async () => {
    const { kafka, base, layout, requestTopic } = await setup("txin", 1);
    const txProducer = transactionalProducer(`${base}-src`, kafka);
    await txProducer.connect();
    const sendTxn = async (ids: string[], commit: boolean) => {
      const txn = await txProducer.transaction();
      const sent = await txn.send({
        topic: requestTopic,
        messages: jsonRequestMessages(ids, "the cat"),
      });
      await endTransaction(txn, commit ? "commit" : "abort", sent, kafka);
    };
    const options = {
      kafka,
      model,
      ...layoutOptions(layout),
      commitIntervalMs: 50,
    };
    await sendTxn(["x-1", "x-2", "x-3"], true);
    await sendTxn(["aborted-1", "aborted-2"], false);
    await sendTxn(["x-4", "x-5"], true);
    const first = createStreamProcessor({ ...options, events: new SluiceEvents() });
    await first.start();
    await readCommitted(layout.results, { expected: 5 });
    await first.close(); // committed offset now points at the last commit marker
    const second = createStreamProcessor({ ...options, events: new SluiceEvents() });
    await second.start();
    // Produce only once the restored partition sits at the marker, so kafkajs steps over it alone.
    while (!second.readiness().ready) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500));
    await sendTxn(["x-6", "x-7"], true);
    const results = await readCommitted(layout.results, {
      expected: 7,
      timeoutMs: 30_000,
      stopWriters: () => second.close(),
    });
    await txProducer.disconnect();
    expect(resultIds(results).sort()).toEqual(["x-1", "x-2", "x-3", "x-4", "x-5", "x-6", "x-7"]);
  }, 60_000);

  it("serves several request topics, each with its own changelog topic", async () => {
    const kafka = testKafka();
    const base = uniqueName("multi");
    const layout = processorLayout(base, { partitions: 2, requests: [`${base}.a`, `${base}.b`] });
    const partitions = await ensureTopics(kafka, layout);
    expect([...partitions.values()]).toEqual([2, 2]);
    await produce(kafka, `${base}.a`, ["a-1", "a-2", "same"]);
    await produce(kafka, `${base}.b`, ["b-1", "same"]); // dedup is per topic-partition
    const processor = createStreamProcessor({
      kafka,
      model,
      events: new SluiceEvents(),
      ...layoutOptions(layout),
      commitIntervalMs: 50,
    });
    await processor.start();
    const results = await readCommitted(layout.results, {
      expected: 5,
      stopWriters: () => processor.close(),
    });
    expect(resultIds(results).sort()).toEqual(["a-1", "a-2", "b-1", "same", "same"]);
    const sources = decodeResults(results).map((r) => r.source.topic);
    expect(new Set(sources)).toEqual(new Set(layout.requests));
    const changelogA = await readCommitted(
      changelogTopicFor(layout.dedupChangelog, layout.groupId, `${base}.a`),
      { expected: 1 },
    );
    expect(changelogIds(changelogA).sort()).toEqual(["a-1", "a-2", "same"]);
  }, 60_000);
});
