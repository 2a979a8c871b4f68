import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Kafka } from "kafkajs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { modelSettings } from "../../src/config/model-settings.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { createResultPublisher } from "../../src/kafka/write/result-publisher.js";
import { TextModelRunner } from "../../src/model/text-model-runner.js";
import type { StreamProcessorOptions } from "../../src/processor/stream-processor-options.js";
import { createTopics, produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import { layoutOptions, processorLayout } from "../support/processor-layout.js";
import { jsonRequestMessages } from "../support/request-messages.js";
import {
  groupProgress,
  killLeftovers,
  readCommitted,
  resultIds,
  type ServeProcess,
  serveEnv,
  startServe,
  waitForProgress,
} from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";
import { createTinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

// delivery.transactions=false: idempotent producer, then consumer.commitOffsets. Real broker, tiny model.
describe("StreamProcessor at-least-once mode (real Kafka, tiny model)", () => {
  let dir: string;
  let model: TextModelRunner;
  let modelEnv: Record<string, string>;
  const procs: ServeProcess[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-alo-"));
    const tiny = await createTinyModel(dir, { task: "embedding" });
    modelEnv = tinyModelEnv(tiny);
    model = await TextModelRunner.create(
      modelSettings({
        modelPath: tiny.modelPath,
        tokenizerPath: tiny.tokenizerPath,
        name: "tiny",
      }),
    );
  });

  afterEach(() => killLeftovers(procs));

  afterAll(async () => {
    await model?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function produce(kafka: Kafka, topic: string, ids: string[]): Promise<void> {
    await produceMessages(topic, jsonRequestMessages(ids, "the cat sat"), { kafka });
  }

  it("publishes without transactions, commits group offsets, and resumes after them on restart", async () => {
    const kafka = testKafka();
    const base = uniqueName("alo");
    const layout = processorLayout(base, { partitions: 2 });
    await ensureTopics(kafka, layout);
    const requestTopic = layout.requests[0] as string;
    const groupId = `${base}-group`;
    const options = (events: SluiceEvents): StreamProcessorOptions => ({
      kafka,
      model,
      events,
      ...layoutOptions(layout),
      transactions: false,
      commitIntervalMs: 50,
      sessionTimeoutMs: 6000,
      heartbeatIntervalMs: 1000,
    });

    const first = Array.from({ length: 60 }, (_, i) => `a-${i}`);
    await produce(kafka, requestTopic, first);
    await produceMessages(requestTopic, [{ key: "bad", value: Buffer.from("{not json") }], { kafka });

    const events1 = new SluiceEvents();
    const outcomes1 = countOutcomes(events1);
    const p1 = createStreamProcessor(options(events1));
    await p1.start();
    let afterFirst = { committed: 0, end: 0 };
    const results1 = await readCommitted(layout.results, {
      expected: first.length,
      // Offsets are committed by the group member once the outputs are acked: wait for the last commit.
      stopWriters: async () => {
        afterFirst = await waitForProgress(groupId, requestTopic, (o) => o.committed === o.end, 5000);
        await p1.close();
      },
    });
    const dlq = await readCommitted(layout.deadLetters, { expected: 1 });

    expect(resultIds(results1).sort()).toEqual([...first].sort());
    expect(dlq.length).toBe(1);
    expect(outcomes1).toEqual({ result: 60, dead_letter: 1, duplicate: 0 });
    expect(afterFirst).toEqual({ committed: 61, end: 61 });
    // No transactions: no commit markers take offsets in the results topic, so its end offsets equal
    // the record count (with transactions every commit adds a marker per partition written).
    expect((await groupProgress(`${base}-nobody`, layout.results)).end).toBe(60);

    // Restart: a new processor must start after the committed offsets (no reprocessing of a-*), and
    // dedup restored from the changelog turns repeated ids into counted duplicates.
    const second = Array.from({ length: 20 }, (_, i) => `b-${i}`);
    await produce(kafka, requestTopic, [...second, "a-1", "a-2", "a-3"]);
    const events2 = new SluiceEvents();
    const outcomes2 = countOutcomes(events2);
    const p2 = createStreamProcessor(options(events2));
    await p2.start();
    let afterSecond = { committed: 0, end: 0 };
    const results2 = await readCommitted(layout.results, {
      expected: 80,
      timeoutMs: 30_000,
      stopWriters: async () => {
        afterSecond = await waitForProgress(groupId, requestTopic, (o) => o.committed >= 84, 5000);
        await p2.close();
      },
    });

    const all = resultIds(results2);
    expect(all.length).toBe(80);
    expect(new Set(all).size).toBe(80);
    expect(outcomes2).toEqual({ result: 20, dead_letter: 0, duplicate: 3 });
    expect(afterSecond).toEqual({ committed: 84, end: 84 });
  }, 90_000);

  it("sluice serve with delivery.transactions=false survives SIGKILL: no loss, duplicates only above the committed offset", async () => {
    const base = uniqueName("alo-kill");
    const topic = `${base}.requests`;
    const group = `${base}-group`;
    await createTopics([{ topic, numPartitions: 3 }]);
    const total = 12_000;
    const ids = Array.from({ length: total }, (_, n) => `k-${n}`);
    const requests = jsonRequestMessages(ids, "the cat sat on the mat");
    await produceMessages(topic, requests, { chunkSize: 1000 });
    // Small fetches (about 20 records) and batches keep the tiny model's drain long enough to be
    // killed mid-stream: with the defaults a fast machine drained nearly all 12,000 between two
    // progress polls (11,532 committed at the kill once), and the test could not kill mid-stream.
    const drainEnv = serveEnv(base, { ...modelEnv, SLUICE_DELIVERY__TRANSACTIONS: "false" });
    const env = {
      ...drainEnv,
      SLUICE_CONSUMER__MAX_BYTES_PER_PARTITION: "2048",
      SLUICE_BATCHING__MAX_BATCH_SIZE: "8",
    };
    const first = startServe([], env);
    procs.push(first);
    await first.waitFor(/sluice serve running/, 60_000);
    const atKill = await waitForProgress(group, topic, (p) => p.committed >= total * 0.1, 60_000);
    first.child.kill("SIGKILL");
    console.log(`at-least-once kill test: SIGKILL at ${atKill.committed}/${total} committed`);
    expect((await first.exited).signal).toBe("SIGKILL");
    expect(atKill.committed).toBeLessThan(total); // really mid-stream
    // The restart only has to finish the topic: default fetches and batches drain the rest quickly.
    const second = startServe([], drainEnv);
    procs.push(second);
    await second.waitFor(/sluice serve running/, 60_000);
    await waitForProgress(group, topic, (p) => p.committed === p.end, 90_000);
    second.child.kill("SIGTERM");
    expect((await second.exited).code).toBe(0);

    const results = await readCommitted(`${base}.results`, { expected: total });
    const counts = new Map<string, number>();
    for (const id of resultIds(results)) counts.set(id, (counts.get(id) ?? 0) + 1);
    // No loss: every request has a result.
    expect(counts.size).toBe(total);
    // Only records above the offsets committed at the kill can be redone; dedup restored from the
    // changelog catches those whose changelog entry had landed.
    const duplicates = results.length - total;
    expect(duplicates).toBeGreaterThanOrEqual(0);
    expect(duplicates).toBeLessThanOrEqual(total - atKill.committed);
  }, 180_000);

  it("refuses at-least-once without a way to commit offsets", async () => {
    await expect(
      createResultPublisher(
        { kafka: testKafka(), groupId: "g", topic: "t", partition: 0 },
        { transactions: false, transactionTimeoutMs: 60_000, maxTransactionBytes: 524_288 },
      ),
    ).rejects.toMatchObject({ code: "CONFIG_INVALID" });
  });
});
