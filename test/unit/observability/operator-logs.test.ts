import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { DeadLetterLog } from "../../../src/observability/dead-letter-log.js";
import { LifecycleLog } from "../../../src/observability/lifecycle-log.js";
import { createLogger, type LogLevel } from "../../../src/observability/logger.js";

const CANARY = "canary-5d1e-REQUEST-TEXT";
const sha16 = (s: string) => createHash("sha256").update(s, "utf8").digest("hex").slice(0, 16);

function setUp(level: LogLevel = "info") {
  const lines: string[] = [];
  const logger = createLogger({ level, destination: { write: (s: string) => void lines.push(s) } });
  const events = new SluiceEvents({
    onListenerError: (_e, error) => {
      throw error;
    },
  });
  new DeadLetterLog({ logger: logger.child({ component: "dead-letters" }) }).attach(events);
  new LifecycleLog(logger.child({ component: "lifecycle" })).attach(events);
  return { events, parsed: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>), lines };
}

describe("DeadLetterLog", () => {
  it("logs each dead letter at warn with code, stage, topic, partition, offset and hashed id, never the record", () => {
    const { events, parsed, lines } = setUp();
    events.emit("record.outcome", {
      topic: "in",
      partition: 2,
      outcome: "dead_letter",
      endToEndMs: 5,
      errorCode: "INFERENCE_FAILED",
      deadLetter: { offset: "41", stage: "model", requestId: "req-7", key: "req-7" },
    });
    events.emit("record.outcome", {
      topic: "in",
      partition: 0,
      outcome: "dead_letter",
      endToEndMs: 5,
      errorCode: "DECODE_FAILED",
      deadLetter: { offset: "9", stage: "decode", key: CANARY },
    });
    events.emit("record.outcome", {
      topic: "in",
      partition: 0,
      outcome: "result",
      status: "ok",
      endToEndMs: 1,
    });
    expect(parsed()).toEqual([
      expect.objectContaining({
        level: 40,
        component: "dead-letters",
        msg: "dead letter",
        code: "INFERENCE_FAILED",
        stage: "model",
        topic: "in",
        partition: 2,
        offset: "41",
        idHash: sha16("req-7"),
      }),
      expect.objectContaining({ level: 40, code: "DECODE_FAILED", offset: "9", keyHash: sha16(CANARY) }),
    ]);
    expect(lines.join("\n")).not.toContain(CANARY);
    expect(lines.join("\n")).not.toContain('"req-7"');
  });

  it("writes nothing above warn", () => {
    const { events, lines } = setUp("error");
    events.emit("record.outcome", { topic: "in", partition: 0, outcome: "dead_letter", endToEndMs: 1 });
    expect(lines).toEqual([]);
  });
});

describe("LifecycleLog", () => {
  it("summarises ownership changes at info and adds transaction, pause and lag lines at debug", () => {
    const emitAll = (events: SluiceEvents) => {
      events.emit("model.loaded", { name: "m", version: "v1", task: "embedding" });
      events.emit("partitions.assigned", { topic: "in", partitions: [0, 1] });
      events.emit("partitions.revoked", { topic: "in", partitions: [1] });
      events.emit("transaction.finished", {
        topic: "in",
        partition: 0,
        outcome: "committed",
        records: 3,
        durationMs: 4,
      });
      events.emit("consumer.paused", { reason: "backpressure" });
      events.emit("consumer.resumed", {});
      events.emit("lag.sampled", {
        groupId: "g",
        sampledAtMs: 1,
        partitions: [],
        topics: [{ topic: "in", lagRecords: 7, throughputRecordsPerSecond: 1, timeToDrainSeconds: 7 }],
      });
    };
    const info = setUp("info");
    emitAll(info.events);
    expect(info.parsed().map((l) => l["msg"])).toEqual([
      "model loaded",
      "partitions assigned",
      "partitions revoked",
    ]);
    expect(info.parsed()[1]).toMatchObject({
      level: 30,
      component: "lifecycle",
      topic: "in",
      partitions: [0, 1],
    });

    const debug = setUp("debug");
    emitAll(debug.events);
    expect(debug.parsed().map((l) => [l["level"], l["msg"]])).toEqual([
      [30, "model loaded"],
      [30, "partitions assigned"],
      [30, "partitions revoked"],
      [20, "transaction committed"],
      [20, "consumer paused"],
      [20, "consumer resumed"],
      [20, "lag sampled"],
    ]);
    expect(debug.parsed()[6]).toMatchObject({ groupId: "g", topics: [{ topic: "in", lagRecords: 7 }] });
  });
});
