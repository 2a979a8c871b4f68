import { describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { OUTPUT_TOO_LARGE } from "../../src/delivery/completion-builder.js";
import { DEAD_LETTER_HEADERS } from "../../src/delivery/dead-letter.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { changelogTopicFor, ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { NoopModel } from "../../src/model/noop-model.js";
import type { StreamProcessorOptions } from "../../src/processor/stream-processor-options.js";
import { createTopics, produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import {
  layoutProcessorOptions,
  type ProcessorLayout,
  processorLayout,
} from "../support/processor-layout.js";
import { readCommitted, resultIds } from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";

// Size limits, backpressure of records waiting for commit, and group scoping of the changelog, on the
// real broker. The no-op model keeps inference out of the way: what is under test is Kafka mechanics.
describe("StreamProcessor limits (real Kafka, no-op model)", () => {
  const model = new NoopModel({ dimensions: 16 });

  const layoutFor = (base: string, groupId = `${base}-group`) => processorLayout(base, { groupId });

  function watch(events: SluiceEvents) {
    const tx = { committed: 0, aborted: 0, failed: 0, fenced: 0, maxRecords: 0 };
    let restores = 0;
    events.on("transaction.finished", (e) => {
      tx[e.outcome]++;
      if (e.outcome === "committed") tx.maxRecords = Math.max(tx.maxRecords, e.records);
    });
    events.on("partitions.restored", () => restores++);
    return { tx, restores: () => restores };
  }

  const options = (
    layout: ProcessorLayout,
    events: SluiceEvents,
    extra: Partial<StreamProcessorOptions> = {},
  ) => layoutProcessorOptions(layout, events, model, extra);

  const request = (id: string) => ({ key: id, ...encodeRequest({ id, text: "hello world" }, "json") });

  it("turns a ~1 MB malformed record into one truncated dead letter; its neighbours get results", async () => {
    const base = uniqueName("big-dlq");
    const layout = layoutFor(base);
    // The request topic accepts the big record; the processor must make its dead letter fit.
    await createTopics([
      {
        topic: layout.requests[0] as string,
        configEntries: [{ name: "max.message.bytes", value: "2000000" }],
      },
    ]);
    await ensureTopics(testKafka(), layout);
    const bigSize = 1_000_000;
    await produceMessages(layout.requests[0] as string, [
      request("ok-0"),
      { key: "big", value: Buffer.alloc(bigSize, 0x41) },
      request("ok-1"),
    ]);
    const events = new SluiceEvents();
    const w = watch(events);
    const processor = createStreamProcessor(options(layout, events));
    await processor.start();
    const results = await readCommitted(layout.results, {
      expected: 2,
      timeoutMs: 30_000,
      stopWriters: () => processor.close(),
    });
    const deadLetters = await readCommitted(layout.deadLetters, { expected: 1 });

    expect(resultIds(results).sort()).toEqual(["ok-0", "ok-1"]);
    expect(deadLetters).toHaveLength(1);
    const dl = deadLetters[0] as (typeof deadLetters)[number];
    expect(dl.key).toBe("big");
    expect(String(dl.headers[DEAD_LETTER_HEADERS.code])).toBe("DECODE_FAILED");
    expect(String(dl.headers[DEAD_LETTER_HEADERS.valueTruncated])).toBe(String(bigSize));
    const value = dl.value as Buffer;
    expect(value.length).toBeGreaterThan(100_000);
    expect(value.length).toBeLessThan(512 * 1024);
    expect(value.equals(Buffer.alloc(value.length, 0x41))).toBe(true); // the first bytes, unchanged
    expect(w.tx.failed + w.tx.fenced).toBe(0);
    expect(w.restores()).toBe(1); // no reset loop
  }, 60_000);

  // Both delivery modes: their publishers report a refused send alike (records, recordIndex), so the
  // committer's one size-refusal loop (src/delivery/size-refusal.ts) maps it to the same record.
  it.each([
    ["in a transaction", true],
    ["at least once", false],
  ])(
    "dead-letters a record without payload when the broker refuses its output even alone (%s)",
    async (_, transactions) => {
      const base = uniqueName("tiny-dlq");
      const layout = layoutFor(base);
      // A dead-letter topic far below the processor's budget: the broker answers MESSAGE_TOO_LARGE.
      await createTopics([
        { topic: layout.deadLetters, configEntries: [{ name: "max.message.bytes", value: "20000" }] },
      ]);
      await ensureTopics(testKafka(), layout);
      await produceMessages(layout.requests[0] as string, [
        request("ok-0"),
        { key: "bad", value: Buffer.alloc(200_000, 0x42) },
        request("ok-1"),
      ]);
      const events = new SluiceEvents();
      const w = watch(events);
      const outcomes: string[] = [];
      events.on("record.outcome", (e) => outcomes.push(e.errorCode ?? e.outcome));
      const processor = createStreamProcessor(options(layout, events, { transactions }));
      await processor.start();
      // All three committed before the reads stop the processor (at least once, a first read may see
      // a repeated result twice and stop early).
      for (let waited = 0; outcomes.length < 3 && waited < 30_000; waited += 50) {
        await new Promise((r) => setTimeout(r, 50));
      }
      const results = await readCommitted(layout.results, {
        expected: 2,
        timeoutMs: 30_000,
        stopWriters: () => processor.close(),
      });
      const deadLetters = await readCommitted(layout.deadLetters, { expected: 1 });

      // At least once, a refused attempt's accepted sends stay published: the retry repeats them.
      if (transactions) expect(results).toHaveLength(2);
      expect(new Set(resultIds(results))).toEqual(new Set(["ok-0", "ok-1"]));
      expect(deadLetters).toHaveLength(1);
      const dl = deadLetters[0] as (typeof deadLetters)[number];
      expect(dl.value).toBeNull();
      expect(String(dl.headers[DEAD_LETTER_HEADERS.code])).toBe(OUTPUT_TOO_LARGE);
      expect(String(dl.headers[DEAD_LETTER_HEADERS.offset])).toBe("1");
      expect(outcomes.sort()).toEqual([OUTPUT_TOO_LARGE, "result", "result"].sort());
      expect(w.tx.aborted).toBeGreaterThan(0); // the refused attempts, retried with smaller sends
      expect(w.tx.failed + w.tx.fenced).toBe(0);
      expect(w.restores()).toBe(1);
    },
    60_000,
  );

  it("drains a fast backlog with a long commit interval: bounded, capped transactions, every record once", async () => {
    const base = uniqueName("backlog");
    const layout = layoutFor(base);
    await ensureTopics(testKafka(), layout);
    const n = 4000;
    await produceMessages(
      layout.requests[0] as string,
      Array.from({ length: n }, (_, i) => request(`r-${i}`)),
      { chunkSize: 500 },
    );
    const events = new SluiceEvents();
    const w = watch(events);
    // Consumed but not committed (outcomes are emitted when their transaction commits).
    let consumed = 0;
    let committed = 0;
    let maxUncommitted = 0;
    events.on("record.consumed", () => {
      consumed++;
      maxUncommitted = Math.max(maxUncommitted, consumed - committed);
    });
    events.on("record.outcome", () => committed++);
    const maxQueuedRecords = 300;
    const processor = createStreamProcessor(
      options(layout, events, {
        commitIntervalMs: 20_000,
        maxQueuedRecords,
        maxTransactionRecords: 250,
        maxBytesPerPartition: 32 * 1024,
      }),
    );
    const started = Date.now();
    await processor.start();
    let drainMs = 0;
    const results = await readCommitted(layout.results, {
      expected: n,
      timeoutMs: 60_000,
      stopWriters: () => {
        drainMs = Date.now() - started;
        return processor.close();
      },
    });

    const ids = resultIds(results);
    expect(ids).toHaveLength(n);
    expect(new Set(ids).size).toBe(n);
    expect(w.tx.failed + w.tx.fenced + w.tx.aborted).toBe(0);
    expect(w.tx.maxRecords).toBeLessThanOrEqual(250);
    // Paused at maxQueuedRecords; one fetch (≤ 32 KiB, a few hundred records) may land on top.
    expect(maxUncommitted).toBeLessThan(maxQueuedRecords + 600);
    // Not one 20 s commit interval per pause: backpressure commits what holds the consumer paused.
    expect(drainMs).toBeLessThan(40_000);
  }, 90_000);

  it("gives every consumer group its own changelog: a second group gets every result too", async () => {
    const base = uniqueName("groups");
    const first = layoutFor(base, `${base}-a`);
    const second = { ...layoutFor(base, `${base}-b`), results: `${base}.results-b` };
    await ensureTopics(testKafka(), first);
    await ensureTopics(testKafka(), second);
    expect(changelogTopicFor(first.dedupChangelog, first.groupId, `${base}.requests`)).not.toBe(
      changelogTopicFor(second.dedupChangelog, second.groupId, `${base}.requests`),
    );
    const ids = Array.from({ length: 40 }, (_, i) => `g-${i}`);
    await produceMessages(first.requests[0] as string, ids.map(request));

    // Sequential on purpose: when the second group starts, the first group's checkpoint is at the
    // end and its changelog holds every id; neither may leak into the second group.
    for (const layout of [first, second]) {
      const events = new SluiceEvents();
      const outcomes = countOutcomes(events);
      const processor = createStreamProcessor(options(layout, events));
      await processor.start();
      const results = await readCommitted(layout.results, {
        expected: ids.length,
        timeoutMs: 30_000,
        stopWriters: () => processor.close(),
      });
      const got = resultIds(results);
      expect(got.sort()).toEqual([...ids].sort());
      expect(outcomes).toEqual({ result: ids.length, dead_letter: 0, duplicate: 0 });
    }
  }, 90_000);
});
