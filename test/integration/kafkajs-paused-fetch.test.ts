import type { Consumer, Producer } from "kafkajs";
import { afterEach, describe, expect, it } from "vitest";
import { fixPausedFetchWait } from "../../src/kafka/protocol/paused-fetch-wait.js";
import { createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";

// kafkajs 2.2.4 sleeps a whole maxWaitTimeInMs when every partition it owns is paused and does not
// notice a resume until the sleep ends (src/kafka/protocol/paused-fetch-wait.ts). On a real broker:
// a consumer with a long wait pauses its only partition, a record arrives while it is paused, and
// after the resume the record must come at once, not when the wait would have ended.

const MAX_WAIT_MS = 4000;

describe("kafkajs paused fetch wait", () => {
  const clients: (Consumer | Producer)[] = [];
  afterEach(async () => {
    await Promise.allSettled(clients.splice(0).map((c) => c.disconnect()));
  });

  it("fetches nothing while paused and at once after a resume", async () => {
    fixPausedFetchWait();
    const topic = uniqueName("paused-fetch");
    await createTopics([{ topic, numPartitions: 1 }]);
    const kafka = testKafka();
    const producer = kafka.producer();
    const consumer = kafka.consumer({ groupId: uniqueName("paused-fetch"), maxWaitTimeInMs: MAX_WAIT_MS });
    clients.push(producer, consumer);
    await producer.connect();
    await producer.send({ topic, messages: [{ value: "first" }] });

    const arrivals: { value: string; at: number }[] = [];
    let firstArrived = (): void => {};
    const first = new Promise<void>((resolve) => {
      firstArrived = resolve;
    });
    let secondArrived = (): void => {};
    const second = new Promise<void>((resolve) => {
      secondArrived = resolve;
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message, pause }) => {
        const value = message.value?.toString() ?? "";
        arrivals.push({ value, at: performance.now() });
        if (value === "first") {
          pause(); // the only partition: the next fetch finds everything paused and waits
          firstArrived();
        } else secondArrived();
      },
    });
    await first;

    // The fetcher is now in its paused wait; the record written meanwhile must stay unfetched.
    await new Promise((r) => setTimeout(r, 500));
    await producer.send({ topic, messages: [{ value: "second" }] });
    await new Promise((r) => setTimeout(r, 500));
    expect(arrivals.map((a) => a.value)).toEqual(["first"]);

    const resumedAt = performance.now();
    consumer.resume([{ topic }]);
    await second;
    const waited = (arrivals[1]?.at ?? Number.NaN) - resumedAt;
    expect(arrivals.map((a) => a.value)).toEqual(["first", "second"]);
    // kafkajs's own sleep would end ~3,000 ms after the resume (4,000 from the pause, 1,000 gone).
    expect(waited).toBeLessThan(MAX_WAIT_MS / 2);
  }, 60_000);
});
