import { describe, expect, it } from "vitest";
import { createStreamProcessor } from "../../src/app/stream-processor-factory.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { DEDUP_SEGMENT_KEY_PREFIX } from "../../src/delivery/dedup-segment.js";
import { encodeExpiry } from "../../src/delivery/deduplicator.js";
import { SluiceEvents } from "../../src/events/sluice-events.js";
import { changelogTopicFor, ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { NoopModel } from "../../src/model/noop-model.js";
import type { StreamProcessorOptions } from "../../src/processor/stream-processor-options.js";
import { produceMessages, testKafka, uniqueName } from "../support/kafka-harness.js";
import {
  layoutProcessorOptions,
  type ProcessorLayout,
  processorLayout,
} from "../support/processor-layout.js";
import { changelogIds, readCommitted, resultIds } from "../support/serve-process.js";
import { countOutcomes } from "../support/sluice-events-fixtures.js";

// The dedup changelog on the real broker: ids written as dedup segments (one record per
// transaction), read back by a restart, next to the per-id records an older version wrote, and
// segments tombstoned once their ids expired (docs/exactly-once.md, "The dedup changelog").
describe("dedup changelog segments (real Kafka, no-op model)", () => {
  const model = new NoopModel({ dimensions: 4 });
  const request = (id: string) => ({ key: id, ...encodeRequest({ id, text: "hello world" }, "json") });
  const SEGMENT = `\uFFFD${DEDUP_SEGMENT_KEY_PREFIX.subarray(1).toString()}`;

  const options = (
    layout: ProcessorLayout,
    events: SluiceEvents,
    extra: Partial<StreamProcessorOptions> = {},
  ) => layoutProcessorOptions(layout, events, model, extra);

  /** Runs a processor until `expected` results are committed, then closes it. */
  async function drain(
    layout: ProcessorLayout,
    expected: number,
    extra: Partial<StreamProcessorOptions> = {},
  ) {
    const events = new SluiceEvents();
    const outcomes = countOutcomes(events);
    const restored: number[] = [];
    events.on("partitions.restored", (e) => restored.push(e.dedupEntries));
    const processor = createStreamProcessor(options(layout, events, extra));
    await processor.start();
    const results = await readCommitted(layout.results, {
      expected,
      timeoutMs: 30_000,
      stopWriters: () => processor.close(),
    });
    return { results, outcomes, restored };
  }

  it("restores ids from the per-id records of an older version and from segments; writes segments only", async () => {
    const base = uniqueName("dedup-seg");
    const layout = processorLayout(base);
    const kafka = testKafka();
    await ensureTopics(kafka, layout);
    const requests = layout.requests[0] as string;
    const changelog = changelogTopicFor(layout.dedupChangelog, layout.groupId, requests);
    // What a version before segments left in the changelog: one record per id, value = expiry.
    const expiry = encodeExpiry(Date.now() + 3_600_000);
    await produceMessages(changelog, [
      { key: "old-1", value: expiry, partition: 0 },
      { key: "old-2", value: expiry, partition: 0 },
    ]);
    await produceMessages(requests, ["old-1", "new-1", "old-2", "new-2"].map(request));

    const first = await drain(layout, 2);
    expect(resultIds(first.results).sort()).toEqual(["new-1", "new-2"]);
    expect(first.outcomes).toEqual({ result: 2, dead_letter: 0, duplicate: 2 });
    expect(first.restored).toEqual([2]);

    const written = await readCommitted(changelog, { expected: 1 });
    const segments = written.filter((r) => r.key?.startsWith(SEGMENT));
    expect(segments.length).toBeGreaterThan(0);
    // The new ids went into segments; no per-id record was written beside the two seeded ones.
    expect(changelogIds(segments).sort()).toEqual(["new-1", "new-2"]);
    expect(changelogIds(written).sort()).toEqual(["new-1", "new-2", "old-1", "old-2"]);

    // A restart restores all four: both formats side by side.
    await produceMessages(requests, ["new-1", "old-2", "new-3"].map(request));
    const second = await drain(layout, 3);
    expect(resultIds(second.results).sort()).toEqual(["new-1", "new-2", "new-3"]);
    expect(second.outcomes).toEqual({ result: 1, dead_letter: 0, duplicate: 2 });
    expect(second.restored).toEqual([4]);
  }, 90_000);

  it("tombstones a segment once its ids expired, and a restart forgets them", async () => {
    const base = uniqueName("dedup-seg-ttl");
    const layout = processorLayout(base);
    const kafka = testKafka();
    await ensureTopics(kafka, layout);
    const requests = layout.requests[0] as string;
    const changelog = changelogTopicFor(layout.dedupChangelog, layout.groupId, requests);
    const ttl = { dedupTtlMs: 1500 };

    await produceMessages(requests, ["a", "b"].map(request));
    const first = await drain(layout, 2, ttl);
    expect(first.outcomes).toEqual({ result: 2, dead_letter: 0, duplicate: 0 });
    const before = (await readCommitted(changelog, { expected: 1 })).filter((r) =>
      r.key?.startsWith(SEGMENT),
    );
    expect(changelogIds(before).sort()).toEqual(["a", "b"]);

    // Past the TTL, the next transaction carries the tombstones of the segments holding a and b.
    await new Promise((r) => setTimeout(r, 2000));
    await produceMessages(requests, ["c", "a"].map(request));
    const second = await drain(layout, 4, ttl);
    // a expired: it is a result again, not a duplicate.
    expect(second.outcomes).toEqual({ result: 2, dead_letter: 0, duplicate: 0 });
    const after = await readCommitted(changelog, { expected: 1 });
    const tombstoned = after.filter((r) => r.key?.startsWith(SEGMENT) && r.value === null).map((r) => r.key);
    expect(tombstoned.sort()).toEqual(before.map((r) => r.key).sort());
  }, 90_000);
});
