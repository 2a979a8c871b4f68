import { afterEach, describe, expect, it } from "vitest";
import { defaultConfig } from "../../src/config/config-schema.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { createKafka } from "../../src/kafka/client/kafka-client.js";
import { type KafkaRequestTiming, observeKafkaRequests } from "../../src/kafka/client/request-timing.js";
import { SluiceMetrics } from "../../src/observability/metrics.js";
import { createTopics, testBrokers, uniqueName } from "../support/kafka-harness.js";

// Every request of a client's producers, consumers and admins is timed by API
// (sluice_kafka_request_duration_seconds): on a real broker, a transactional producer's requests and
// an admin's reach the listener, and through the event bus the histogram.

describe("Kafka request timing", () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.allSettled(closers.splice(0).map((close) => close()));
  });

  it("tells each request of the client's producers and admins, by API, until detached", async () => {
    const topic = uniqueName("request-timing");
    await createTopics([{ topic, numPartitions: 1 }]);
    const kafka = createKafka({ ...defaultConfig().kafka, brokers: testBrokers() });
    const events = new SluiceEvents();
    const metrics = new SluiceMetrics({ collectDefaultMetrics: false });
    const detachMetrics = metrics.attach(events);
    const seen: KafkaRequestTiming[] = [];
    const detach = observeKafkaRequests(kafka, (t) => {
      seen.push(t);
      events.emit("kafka.request", t);
    });
    const producer = kafka.producer({
      transactionalId: uniqueName("request-timing-txn"),
      maxInFlightRequests: 1,
    });
    closers.push(() => producer.disconnect());
    await producer.connect();
    const txn = await producer.transaction();
    await txn.send({ topic, messages: [{ value: "one" }] });
    await txn.commit();
    const admin = kafka.admin();
    closers.push(() => admin.disconnect());
    await admin.connect();
    await admin.fetchTopicOffsets(topic);

    const apis = new Set(seen.map((t) => t.api));
    for (const api of ["InitProducerId", "AddPartitionsToTxn", "Produce", "EndTxn", "ListOffsets"])
      expect(apis, api).toContain(api);
    for (const t of seen) expect(t.durationMs).toBeGreaterThanOrEqual(0);
    const text = await metrics.registry.metrics();
    const produced = /^sluice_kafka_request_duration_seconds_count\{api="Produce"\} (\d+)$/m.exec(text);
    expect(Number(produced?.[1])).toBe(seen.filter((t) => t.api === "Produce").length);

    detach();
    const before = seen.length;
    await admin.fetchTopicOffsets(topic);
    expect(seen.length).toBe(before);
    detachMetrics();
  });
});
