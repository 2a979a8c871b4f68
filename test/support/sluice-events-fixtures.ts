import type { SluiceEvents } from "../../src/events/sluice-events.js";

/**
 * Test-side use of the `SluiceEvents` bus: emitting what a pipeline stage would report (unit tests of
 * subscribers) and tallying what a real pipeline reported (integration tests).
 */

/** Emits a committed one-record transaction on `topic`/`partition` whose next offset is `nextOffset`. */
export function emitCommitted(
  events: SluiceEvents,
  commit: { topic: string; partition: number; nextOffset: number; lastEventTimestampMs?: number },
): void {
  const { topic, partition, nextOffset, lastEventTimestampMs } = commit;
  events.emit("transaction.finished", {
    topic,
    partition,
    outcome: "committed",
    records: 1,
    durationMs: 1,
    nextOffset: String(nextOffset),
    ...(lastEventTimestampMs === undefined ? {} : { lastEventTimestampMs }),
  });
}

/** Record outcomes by kind, as counted from `record.outcome` events. */
export interface OutcomeCounts {
  result: number;
  dead_letter: number;
  duplicate: number;
}

/** Counts `record.outcome` events from now on; the returned object updates as events arrive. */
export function countOutcomes(events: SluiceEvents): OutcomeCounts {
  const counts: OutcomeCounts = { result: 0, dead_letter: 0, duplicate: 0 };
  events.on("record.outcome", (e) => {
    counts[e.outcome]++;
  });
  return counts;
}
