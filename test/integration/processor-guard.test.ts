import { describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { RUN_ID_HEADER } from "../../src/contracts/lane.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { type SluiceEventMap, SluiceEvents } from "../../src/events/sluice-events.js";
import { produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import { lanesLayout } from "../support/lanes-layout.js";
import { layoutOptions } from "../support/processor-layout.js";
import { decodeResults, readCommitted } from "../support/serve-process.js";
import { tinyClassifierForSuite } from "../support/tiny-classifier.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// The SLO guard against the real broker (docs/lanes.md, "The SLO guard"): a target no online request
// can meet forces it to pause the backfill lane. While online requests keep coming, backfill commits
// stop and online results keep flowing; when online traffic ends the guard releases and every record
// of both lanes ends as exactly one result.
describe("StreamProcessor SLO guard (real Kafka, tiny classifier)", () => {
  const tinyModel = tinyClassifierForSuite("sluice-guard-");

  it("a forced guard stops backfill commits while online results flow; all complete exactly once on release", async () => {
    const kafka = testKafka();
    const base = uniqueName("guard");
    const { topics, online, backfill, runsTopic } = await lanesLayout(kafka, base);
    const model = tinyModel();

    const events = new SluiceEvents();
    const guard: SluiceEventMap["guard.adjusted"][] = [];
    events.on("guard.adjusted", (e) => guard.push(e));
    const commits: { lane: "online" | "backfill"; atMs: number; records: number }[] = [];
    events.on("transaction.finished", (e) => {
      if (e.outcome === "committed")
        commits.push({
          lane: e.topic === backfill ? "backfill" : "online",
          atMs: Date.now(),
          records: e.records,
        });
    });
    const processor = createStreamProcessor({
      kafka,
      model,
      events,
      ...layoutOptions(topics),
      backfillTopics: [backfill],
      runsTopic,
      // No request can be answered in 1 ms: the guard engages and pauses the backfill lane.
      onlineLatencyTargetMs: 1,
      maxBatchSize: 8,
      commitIntervalMs: 50,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 1000,
    });
    await processor.start();

    let onlineSent = 0;
    const sendOnline = async (n: number) => {
      const batch = Array.from({ length: n }, () => {
        const id = `o-${onlineSent++}`;
        return { key: id, ...encodeRequest({ id, text: "a good movie" }, "json") };
      });
      await produceMessages(online, batch, { kafka });
    };
    // Online traffic until the guard has paused the backfill lane (allowance 0).
    const engagedBy = Date.now() + 60_000;
    while (!guard.some((g) => g.allowance === 0)) {
      expect(Date.now(), "the guard paused the backfill lane within 60 s").toBeLessThan(engagedBy);
      await sendOnline(2);
      await sleep(100);
    }
    expect(guard.find((g) => g.transition === "engaged")).toBeDefined();

    // A backfill arrives while online traffic goes on: no backfill commit, online commits continue.
    const rows = 120;
    await produceMessages(
      backfill,
      Array.from({ length: rows }, (_, i) => ({
        key: `b-${i}`,
        ...encodeRequest({ id: `b-${i}`, text: "the cat sat" }, "json"),
        headers: { "content-type": "application/json", [RUN_ID_HEADER]: "run-guard" },
      })),
      { kafka },
    );
    const heldFrom = Date.now();
    for (let i = 0; i < 30; i++) {
      await sendOnline(2);
      await sleep(100);
    }
    const heldUntil = Date.now();
    const during = commits.filter((c) => c.atMs >= heldFrom && c.atMs <= heldUntil);
    expect(during.filter((c) => c.lane === "backfill")).toEqual([]);
    expect(during.filter((c) => c.lane === "online").length).toBeGreaterThan(3);
    expect(guard.every((g) => g.targetMs === 1)).toBe(true);

    // Online traffic ends: no samples, the guard releases and the backfill completes.
    const total = rows + onlineSent;
    const results = await readCommitted(topics.results, {
      expected: total,
      timeoutMs: 90_000,
      stopWriters: () => processor.close(),
    });

    const ids = decodeResults(results).map((r) => r.id);
    expect(ids.length).toBe(total);
    expect(new Set(ids).size).toBe(total);
    for (let i = 0; i < rows; i++) expect(ids).toContain(`b-${i}`);
    expect(commits.some((c) => c.lane === "backfill" && c.atMs > heldUntil)).toBe(true);
    // Released gradually: the allowance rose again above 0 after the pause.
    const lastPause = guard.map((g) => g.allowance).lastIndexOf(0);
    expect(guard.slice(lastPause).some((g) => g.allowance > 0)).toBe(true);
  }, 180_000);
});
