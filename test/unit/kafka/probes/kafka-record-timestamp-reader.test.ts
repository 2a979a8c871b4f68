import type { Kafka } from "kafkajs";
import { describe, expect, it } from "vitest";
import { KafkaRecordTimestampReader } from "../../../../src/kafka/probes/kafka-record-timestamp-reader.js";

// The reads themselves need a broker: test/integration/observability-lag.test.ts. These are the
// cases that must not touch one.
const noKafka = {
  consumer: () => {
    throw new Error("no consumer expected");
  },
  [Symbol("private:Kafka:createCluster")]: () => {
    throw new Error("no broker connection expected");
  },
} as unknown as Kafka;

describe("KafkaRecordTimestampReader without a broker", () => {
  it("answers empty ranges without a fetch", async () => {
    const reader = new KafkaRecordTimestampReader(noKafka);
    const results = await reader.read(
      [{ topic: "t", partition: 0, fromOffset: "5", offset: "5", untilOffset: "5", countDataRecords: false }],
      1000,
    );
    expect([...results.values()]).toEqual([{ before: undefined, atOrAfter: undefined }]);
  });

  it("rejects a probe whose offsets are out of order, and a timeout that is not positive", async () => {
    const reader = new KafkaRecordTimestampReader(noKafka);
    await expect(
      reader.read(
        [
          {
            topic: "t",
            partition: 0,
            fromOffset: "6",
            offset: "5",
            untilOffset: "9",
            countDataRecords: false,
          },
        ],
        1000,
      ),
    ).rejects.toMatchObject({ code: "INTERNAL" });
    await expect(reader.read([], 0)).rejects.toMatchObject({ code: "INTERNAL" });
  });
});
