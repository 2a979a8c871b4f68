import type { Kafka, KafkaMessage } from "kafkajs";
import { topicPartitionKey } from "../../contracts/topic-partition.js";
import type {
  ProbedRecord,
  ProbeResult,
  RecordTimestampReader,
  TimestampProbe,
} from "../../observability/record-timestamp-reader.js";
import { isSluiceError, SluiceError } from "../../sluice-error.js";
import { readBounded } from "../read/bounded-reader.js";

interface ProbeState {
  probe: TimestampProbe;
  from: bigint;
  split: bigint;
  until: bigint;
  before: ProbedRecord | null;
  atOrAfter: ProbedRecord | null;
  /** Highest offset the fetches have moved past (data or marker), -1n before the first batch. */
  reached: bigint;
  /** Data records seen in `[split, until)` (counting probes), and the highest one counted. */
  dataRecords: number;
  lastCounted: bigint;
}

function resultOf(st: ProbeState): ProbeResult {
  const wantBefore = st.from < st.split;
  const wantAfter = st.split < st.until;
  const scanned = st.reached + 1n >= st.until;
  return {
    ...(st.probe.countDataRecords && (scanned || !wantAfter) ? { dataRecords: st.dataRecords } : {}),
    before: !wantBefore ? undefined : st.reached + 1n >= st.split || st.atOrAfter ? st.before : undefined,
    atOrAfter: !wantAfter
      ? undefined
      : st.atOrAfter
        ? st.atOrAfter
        : st.reached + 1n >= st.until
          ? null
          : undefined,
  };
}
/**
 * `RecordTimestampReader` on Kafka: reads the timestamps of individual records, e.g. the one at a
 * group's committed offset.
 *
 * Each `read()` is one `readBounded` (bounded-reader.ts: fetches without a consumer group,
 * `read_committed`, so aborted records are skipped and marker-only batches still move a probe on); a
 * probed partition is no longer fetched once it is answered.
 * Cost: one Fetch per partition leader per round, however many partitions are probed (usually one
 * round); a counting probe (`countDataRecords`) reads its whole look-ahead, a fetch per 64 KiB. It
 * needs READ on the probed topics only.
 */
export class KafkaRecordTimestampReader implements RecordTimestampReader {
  constructor(private readonly kafka: Kafka) {}

  async read(probes: readonly TimestampProbe[], timeoutMs: number): Promise<Map<string, ProbeResult>> {
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      throw new SluiceError("INTERNAL", `record timestamp read timeoutMs must be > 0, got ${timeoutMs}`);
    }
    const states = new Map<string, ProbeState>();
    for (const probe of probes) {
      const from = BigInt(probe.fromOffset);
      const split = BigInt(probe.offset);
      const until = BigInt(probe.untilOffset);
      if (from > split || split > until) {
        throw new SluiceError("INTERNAL", `Bad timestamp probe ${from}..${split}..${until}`, {
          context: { topic: probe.topic, partition: probe.partition },
        });
      }
      const st: ProbeState = {
        probe,
        from,
        split,
        until,
        before: null,
        atOrAfter: null,
        reached: from - 1n,
        dataRecords: 0,
        lastCounted: split - 1n,
      };
      states.set(topicPartitionKey(probe.topic, probe.partition), st);
    }
    // An empty range (from = until) is answered as it is: nothing to read.
    const pending = [...states.values()].filter((st) => st.from < st.until);
    if (pending.length > 0) await this.fetch(pending, timeoutMs);
    const results = new Map<string, ProbeResult>();
    for (const [k, st] of states) results.set(k, resultOf(st));
    return results;
  }

  private async fetch(pending: ProbeState[], timeoutMs: number): Promise<void> {
    const onBatch = (st: ProbeState, messages: readonly KafkaMessage[], lastOffset: bigint): boolean => {
      for (const m of messages) {
        const offset = BigInt(m.offset);
        if (offset < st.from) continue;
        if (offset >= st.until) break;
        const rec = { offset: m.offset, timestampMs: Number(m.timestamp) };
        if (offset < st.split) {
          st.before = rec;
        } else if (st.probe.countDataRecords) {
          st.atOrAfter ??= rec;
          if (offset > st.lastCounted) {
            st.dataRecords += 1;
            st.lastCounted = offset;
          }
        } else {
          st.atOrAfter = rec;
          st.reached = offset;
          return true;
        }
      }
      if (lastOffset > st.reached) st.reached = lastOffset;
      return st.reached + 1n >= st.until;
    };
    try {
      // A probe not answered by the timeout reports what it saw (`resultOf`).
      await readBounded({
        kafka: this.kafka,
        ranges: pending.map((st) => ({
          topic: st.probe.topic,
          partition: st.probe.partition,
          fromOffset: st.probe.fromOffset,
          state: st,
        })),
        order: "parallel",
        doing: "reading record timestamps (lag seconds)",
        onBatch: (range, messages, lastOffset) => onBatch(range.state, messages, lastOffset),
        timeoutMs,
        // A small first batch is enough: we want a record or two, not throughput.
        maxBytesPerPartition: 64 * 1024,
        retries: 2,
      });
    } catch (cause) {
      // readBounded classifies Kafka failures (naming the topic access); anything else is
      // the broker not answering.
      if (isSluiceError(cause)) throw cause;
      throw new SluiceError(
        "BROKER_UNAVAILABLE",
        `Could not read record timestamps: ${(cause as Error).message}`,
        {
          retriable: true,
          cause,
        },
      );
    }
  }
}
