import type { Kafka } from "kafkajs";
import { describe, expect, it } from "vitest";
import { KafkaGroupOffsetsReader } from "../../../../src/kafka/probes/kafka-group-offsets-reader.js";

/** A kafkajs client whose admin answers from fixed offsets; counts connects and disconnects. */
function fakeKafka(opts: { failConnect?: Error; failFetch?: Error } = {}) {
  const calls = { admins: 0, connects: 0, disconnects: 0 };
  const kafka = {
    admin: () => {
      calls.admins += 1;
      return {
        connect: async () => {
          calls.connects += 1;
          if (opts.failConnect) throw opts.failConnect;
        },
        disconnect: async () => {
          calls.disconnects += 1;
        },
        fetchTopicOffsets: async (topic: string) => {
          if (opts.failFetch) throw opts.failFetch;
          return topic === "a"
            ? [
                { partition: 1, low: "2", high: "9", offset: "9" },
                { partition: 0, low: "0", high: "4", offset: "4" },
              ]
            : [{ partition: 0, low: "0", high: "1", offset: "1" }];
        },
        fetchOffsets: async ({ topics }: { topics?: string[] }) =>
          (topics ?? ["a", "b"]).map((topic) => ({
            topic,
            partitions:
              topic === "a"
                ? [
                    { partition: 0, offset: "3" },
                    { partition: 1, offset: "-1" },
                  ]
                : [{ partition: 0, offset: "-1" }],
          })),
      };
    },
  } as unknown as Kafka;
  return { kafka, calls };
}

describe("KafkaGroupOffsetsReader", () => {
  it("joins log offsets and commits per partition, sorted; kafkajs's -1 becomes null", async () => {
    const { kafka, calls } = fakeKafka();
    const reader = new KafkaGroupOffsetsReader(kafka);
    expect(await reader.partitionOffsets("g", ["a", "b"])).toEqual([
      { topic: "a", partition: 0, logStartOffset: "0", logEndOffset: "4", committedOffset: "3" },
      { topic: "a", partition: 1, logStartOffset: "2", logEndOffset: "9", committedOffset: null },
      { topic: "b", partition: 0, logStartOffset: "0", logEndOffset: "1", committedOffset: null },
    ]);
    expect(await reader.committedTopics("g")).toEqual(["a"]);
    expect(calls).toMatchObject({ admins: 1, connects: 1 }); // one admin, kept between reads
    await reader.close();
    await reader.close();
    expect(calls.disconnects).toBe(1);
  });

  it("an unreachable broker is BROKER_UNAVAILABLE (retriable) and the failed admin is given back", async () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    const { kafka, calls } = fakeKafka({ failConnect: refused });
    const reader = new KafkaGroupOffsetsReader(kafka);
    await expect(reader.partitionOffsets("g", ["a"])).rejects.toMatchObject({
      code: "BROKER_UNAVAILABLE",
      retriable: true,
    });
    expect(calls.disconnects).toBe(1);
    // The next read tries a fresh admin.
    await expect(reader.partitionOffsets("g", ["a"])).rejects.toMatchObject({ code: "BROKER_UNAVAILABLE" });
    expect(calls.admins).toBe(2);
  });

  it("a refused DESCRIBE is AUTHORIZATION_FAILED naming the group and the topics", async () => {
    const denied = Object.assign(new Error("Not authorized to access group"), {
      type: "GROUP_AUTHORIZATION_FAILED",
    });
    const { kafka } = fakeKafka({ failFetch: denied });
    const error = await new KafkaGroupOffsetsReader(kafka).partitionOffsets("g", ["a"]).catch((e) => e);
    expect(error).toMatchObject({ code: "AUTHORIZATION_FAILED" });
    expect(error.message).toContain('DESCRIBE on GROUP "g"');
  });
});
