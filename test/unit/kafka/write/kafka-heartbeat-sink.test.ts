import type { Kafka, ProducerRecord } from "kafkajs";
import { describe, expect, it } from "vitest";
import {
  decodeHeartbeat,
  type FreshnessHeartbeat,
  HEARTBEAT_CONTENT_TYPE,
} from "../../../../src/contracts/freshness-heartbeat.js";
import { KafkaHeartbeatSink } from "../../../../src/kafka/write/kafka-heartbeat-sink.js";

const beat: FreshnessHeartbeat = {
  instanceId: "i1",
  groupId: "g",
  topic: "requests",
  partition: 2,
  committedOffset: 7,
  lastCommittedEventTimestampMs: 1000,
  lagRecords: 0,
  lagSeconds: 0,
  emittedAtMs: 5000,
  completeUpToMs: 4000,
};

function fakeKafka(failSend?: Error) {
  const sent: ProducerRecord[] = [];
  const calls = { producers: 0, disconnects: 0 };
  const kafka = {
    producer: () => {
      calls.producers += 1;
      return {
        connect: async () => {},
        disconnect: async () => {
          calls.disconnects += 1;
        },
        send: async (record: ProducerRecord) => {
          if (failSend) throw failSend;
          sent.push(record);
          return [];
        },
      };
    },
  } as unknown as Kafka;
  return { kafka, sent, calls };
}

describe("KafkaHeartbeatSink", () => {
  it("one Avro record per beat, keyed group/topic/partition, with content type and instance headers", async () => {
    const { kafka, sent } = fakeKafka();
    const sink = new KafkaHeartbeatSink(kafka, { topic: "fresh" });
    await sink.publish([beat]);
    await sink.publish([]); // nothing owned: nothing sent
    expect(sent).toHaveLength(1);
    const [record] = sent;
    expect(record).toMatchObject({ topic: "fresh", acks: -1 });
    const [message] = record!.messages;
    expect(message).toMatchObject({
      key: "g/requests/2",
      timestamp: "5000",
      headers: { "content-type": HEARTBEAT_CONTENT_TYPE, "sluice-instance-id": "i1" },
    });
    expect(decodeHeartbeat(message!.value as Buffer)).toEqual(beat);
    await sink.close();
  });

  it("a refused send is AUTHORIZATION_FAILED naming the topic, and the producer is given back", async () => {
    const denied = Object.assign(new Error("Not authorized to access topics"), {
      type: "TOPIC_AUTHORIZATION_FAILED",
    });
    const { kafka, calls } = fakeKafka(denied);
    const sink = new KafkaHeartbeatSink(kafka, { topic: "fresh" });
    const error = await sink.publish([beat]).catch((e) => e);
    expect(error).toMatchObject({ code: "AUTHORIZATION_FAILED" });
    expect(error.message).toContain('WRITE on TOPIC "fresh"');
    expect(calls.disconnects).toBe(1);
    await sink.publish([beat]).catch(() => undefined);
    expect(calls.producers).toBe(2); // a fresh producer for the next beat
  });
});
