import { describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { RUN_ID_HEADER } from "../../src/contracts/lane.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { ensureTopics } from "../../src/kafka/client/topic-admin.js";
import type { SluiceError } from "../../src/sluice-error.js";
import { createTopics, produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import { layoutOptions, processorLayout } from "../support/processor-layout.js";
import { tinyClassifierForSuite } from "../support/tiny-classifier.js";

// A topic the processor writes in its transactions that does not exist is a permanent error: kafkajs
// reports it as retriable ("This server does not host this topic-partition"), and a partition reset
// would retry it forever. The processor says which topic and which setting, and stops.
describe("StreamProcessor with a missing output topic (real Kafka)", () => {
  const tinyModel = tinyClassifierForSuite("sluice-missing-");

  it("start() refuses with TOPIC_MISSING naming the topic and its setting", async () => {
    const kafka = testKafka();
    const topics = processorLayout(uniqueName("missing-start"));
    await createTopics([{ topic: topics.requests[0] as string, numPartitions: 1 }]);
    const processor = createStreamProcessor({
      kafka,
      model: tinyModel(),
      events: new SluiceEvents(),
      ...layoutOptions(topics),
    });
    const error = await processor.start().then(
      () => undefined,
      (e: SluiceError) => e,
    );
    await processor.close();
    expect(error?.code).toBe("TOPIC_MISSING");
    expect(error?.message).toContain(`"${topics.results}" (topics.results)`);
    expect(error?.message).toContain("(topics.dedupChangelog)");
  }, 60_000);

  it("backfill rows with no runs topic: one TOPIC_MISSING naming topics.runs, no reset loop", async () => {
    const kafka = testKafka();
    const base = uniqueName("missing-runs");
    const topics = processorLayout(base);
    const backfill = `${base}.backfill`;
    await ensureTopics(kafka, { ...topics, requests: [...topics.requests, backfill] });
    const events = new SluiceEvents();
    const processor = createStreamProcessor({
      kafka,
      model: tinyModel(),
      events,
      ...layoutOptions(topics),
      backfillTopics: [backfill],
      runsTopic: `${base}.runs`,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    const fatal: SluiceError[] = [];
    processor.onFatal((e) => fatal.push(e));
    let aborted = 0;
    events.on("transaction.finished", (e) => {
      if (e.outcome !== "committed") aborted++;
    });
    // The runs topic is created by the first submit, so start() does not ask for it.
    await processor.start();
    try {
      await produceMessages(
        backfill,
        Array.from({ length: 5 }, (_, i) => ({
          key: `b-${i}`,
          ...encodeRequest({ id: `b-${i}`, text: "the cat sat" }, "json"),
          headers: { "content-type": "application/json", [RUN_ID_HEADER]: "run-missing" },
        })),
        { kafka },
      );
      const until = Date.now() + 90_000;
      while (fatal.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
      expect(fatal.map((e) => e.code)).toEqual(["TOPIC_MISSING"]);
      expect(fatal[0]?.message).toContain(`"${base}.runs" (topics.runs)`);
      // Stopped, not retried: no further transactions after the failure.
      const seen = aborted;
      await new Promise((r) => setTimeout(r, 3000));
      expect(aborted).toBe(seen);
      expect(fatal).toHaveLength(1);
    } finally {
      await processor.close();
    }
  }, 120_000);
});
