import { describe, expect, it } from "vitest";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { InFlightRecords } from "../../../src/observability/in-flight-records.js";
import { emitCommitted } from "../../support/sluice-events-fixtures.js";

function setup() {
  const events = new SluiceEvents();
  const tracker = new InFlightRecords(events);
  events.emit("partitions.assigned", { topic: "t", partitions: [0, 1] });
  const consume = (partition: number, offset: number, timestampMs: number) =>
    events.emit("record.consumed", { topic: "t", partition, offset: String(offset), timestampMs });
  const commit = (partition: number, nextOffset: number) =>
    emitCommitted(events, { topic: "t", partition, nextOffset });
  return { events, tracker, consume, commit };
}

describe("InFlightRecords", () => {
  it("knows the timestamp of the first uncommitted record of owned partitions", () => {
    const { tracker, consume, commit } = setup();
    for (let o = 10; o < 15; o++) consume(0, o, 1000 + o);
    expect(tracker.firstUncommitted("t", 0, 10n)).toBe(1010);
    commit(0, 12);
    expect(tracker.firstUncommitted("t", 0, 12n)).toBe(1012);
    expect(tracker.size()).toBe(3);
    // A committed offset the tracker has not consumed up to (or past) is not guessed.
    expect(tracker.firstUncommitted("t", 0, 20n)).toBeUndefined();
    expect(tracker.firstUncommitted("t", 1, 0n)).toBeUndefined();
    expect(tracker.firstUncommitted("other", 0, 0n)).toBeUndefined();
  });

  it("ignores re-fetched duplicates, restarts on rewind, forgets revoked partitions", () => {
    const { events, tracker, consume, commit } = setup();
    consume(0, 5, 50);
    consume(0, 6, 60);
    consume(0, 5, 50); // re-fetch after an aborted transaction
    expect(tracker.size()).toBe(2);
    commit(0, 7);
    consume(0, 7, 70);
    expect(tracker.firstUncommitted("t", 0, 7n)).toBe(70);
    events.emit("partitions.revoked", { topic: "t", partitions: [0] });
    expect(tracker.owns("t", 0)).toBe(false);
    expect(tracker.owned()).toEqual([{ topic: "t", partition: 1 }]);
    expect(tracker.firstUncommitted("t", 0, 7n)).toBeUndefined();
  });

  it("stays bounded by what is in flight over many commits", () => {
    const { tracker, consume, commit } = setup();
    for (let o = 0; o < 10_000; o++) {
      consume(1, o, o);
      if (o % 10 === 9) commit(1, o + 1);
    }
    expect(tracker.size()).toBe(0);
    consume(1, 10_000, 42);
    expect(tracker.firstUncommitted("t", 1, 10_000n)).toBe(42);
  });
});
