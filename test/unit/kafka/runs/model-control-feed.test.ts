import type { Kafka } from "kafkajs";
import { describe, expect, it } from "vitest";
import { ModelControlFeed } from "../../../../src/kafka/runs/model-control-feed.js";

// The reads themselves are on the real broker (test/integration/processor-model-switch.test.ts). Here:
// a refusal after the start is permanent, so the feed reports it once and stops instead of retrying
// every second for ever.
function refusingKafka() {
  let fetches = 0;
  const broker = {
    fetch: async () => {
      fetches++;
      throw Object.assign(new Error("Not authorized to access topics: [Topic authorization failed]"), {
        name: "KafkaJSProtocolError",
        type: "TOPIC_AUTHORIZATION_FAILED",
        retriable: false,
      });
    },
  };
  const cluster = {
    connect: async () => {},
    disconnect: async () => {},
    refreshMetadata: async () => {},
    addMultipleTargetTopics: async () => {},
    findLeaderForPartitions: (_t: string, partitions: number[]) => ({ "1": partitions }),
    findBroker: async () => broker,
    fetchTopicsOffset: async () => [],
  };
  const kafka = {
    admin: () => ({
      connect: async () => {},
      disconnect: async () => {},
      listTopics: async () => ["control"],
      fetchTopicOffsets: async () => [{ partition: 0, offset: "0", high: "0", low: "0" }],
    }),
    [Symbol("private:Kafka:createCluster")]: () => cluster,
  } as unknown as Kafka;
  return { kafka, fetches: () => fetches };
}

describe("ModelControlFeed after its start", () => {
  it("reports an access failure once, as not retried, and stops following", async () => {
    const { kafka, fetches } = refusingKafka();
    const reports: { code: unknown; retrying: boolean }[] = [];
    const feed = new ModelControlFeed({
      kafka,
      topic: "control",
      groupId: "g",
      startTimeoutMs: 5_000,
      onFollowError: (error, retrying) =>
        reports.push({ code: (error as { code?: unknown }).code, retrying }),
    });
    await feed.start();
    // A retried read would come back after 1 s: wait past that.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(reports).toEqual([{ code: "AUTHORIZATION_FAILED", retrying: false }]);
    expect(fetches()).toBe(1);
    await feed.stop();
  });
});
