import { describe, expect, it } from "vitest";
import { areaOf, summarize } from "../../../bench/cpu-profile-summary.js";

describe("bench/cpu-profile-summary: self time by area of a V8 CPU profile", () => {
  it("names areas: Sluice's rooms, kafkajs's folders, other packages, Node.js, V8's own nodes", () => {
    expect(areaOf("commitRange", "file:///w/sluice/dist/src/delivery/partition-committer.js")).toBe(
      "src/delivery",
    );
    expect(areaOf("send", "file:///w/sluice/dist/src/kafka/write/transactional-producer.js")).toBe(
      "src/kafka/write",
    );
    expect(areaOf("encode", "file:///w/sluice/node_modules/kafkajs/src/protocol/encoder.js")).toBe(
      "kafkajs/src/protocol",
    );
    expect(areaOf("info", "file:///w/sluice/node_modules/pino/lib/proto.js")).toBe("pino");
    expect(areaOf("write", "node:internal/streams/writable")).toBe("node: internal");
    expect(areaOf("(idle)", "")).toBe("idle (event loop waiting)");
    expect(areaOf("(garbage collector)", "")).toBe("garbage collector");
  });

  it("adds each sample's time delta to its node's area and function, skipping the first fromMs", () => {
    const frame = (id: number, functionName: string, url: string) => ({
      id,
      callFrame: { functionName, url, lineNumber: 0 },
    });
    const profile = {
      nodes: [
        frame(1, "(idle)", ""),
        frame(2, "decode", "file:///x/dist/src/contracts/request-codec.js"),
        frame(3, "encode", "file:///x/node_modules/kafkajs/src/protocol/encoder.js"),
      ],
      startTime: 0,
      // 1 ms start-up (skipped), then 3 ms idle, 2 ms decode, 1 ms encode (microseconds).
      samples: [2, 1, 1, 1, 2, 2, 3],
      timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000],
    };
    const s = summarize(profile, 1);
    expect(s.totalMs).toBe(6);
    expect(s.areas).toEqual([
      { area: "idle (event loop waiting)", ms: 3 },
      { area: "src/contracts", ms: 2 },
      { area: "kafkajs/src/protocol", ms: 1 },
    ]);
    expect(s.functions[1]).toMatchObject({ area: "src/contracts", ms: 2 });
  });
});
