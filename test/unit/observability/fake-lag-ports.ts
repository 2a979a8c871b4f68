import { topicPartitionKey } from "../../../src/contracts/topic-partition.js";
import type {
  GroupOffsetsReader,
  PartitionOffsets,
} from "../../../src/observability/group-offsets-reader.js";
import type {
  ProbeResult,
  RecordTimestampReader,
  TimestampProbe,
} from "../../../src/observability/record-timestamp-reader.js";

/** What sits at an offset of the fake log: a data record (its timestamp), or a marker / aborted record. */
export type LogEntry = { timestampMs: number } | "marker" | "aborted";

/** One partition of the fake broker; tests move it between samples. */
export interface FakePartition {
  low?: number;
  end: number;
  committed?: number;
  /** Offset → entry; offsets not listed are data records with timestamp 0. */
  log?: Record<number, LogEntry>;
}

/** Broker state the fake ports answer from, per topic and partition. */
export type FakeBroker = Record<string, Record<number, FakePartition>>;

/** `GroupOffsetsReader` over a `FakeBroker` (one group). */
export class FakeOffsets implements GroupOffsetsReader {
  closed = 0;
  constructor(private readonly broker: FakeBroker) {}

  async partitionOffsets(_groupId: string, topics: readonly string[]): Promise<PartitionOffsets[]> {
    return topics.flatMap((topic) =>
      Object.entries(this.broker[topic] ?? {}).map(([p, st]) => ({
        topic,
        partition: Number(p),
        logStartOffset: String(st.low ?? 0),
        logEndOffset: String(st.end),
        committedOffset: st.committed === undefined ? null : String(st.committed),
      })),
    );
  }

  async committedTopics(): Promise<string[]> {
    return Object.keys(this.broker).filter((t) =>
      Object.values(this.broker[t]!).some((p) => p.committed !== undefined),
    );
  }

  async close(): Promise<void> {
    this.closed += 1;
  }
}

/**
 * `RecordTimestampReader` over a `FakeBroker`, with the port's semantics (read_committed: markers and
 * aborted records are not data records). Every call is recorded; `fail` makes the next reads throw,
 * `unanswered` makes them answer nothing (as when the read times out).
 */
export class FakeTimestamps implements RecordTimestampReader {
  readonly calls: TimestampProbe[][] = [];
  fail: Error | undefined;
  unanswered = false;
  constructor(private readonly broker: FakeBroker) {}

  async read(probes: readonly TimestampProbe[], _timeoutMs: number): Promise<Map<string, ProbeResult>> {
    this.calls.push([...probes]);
    if (this.fail) throw this.fail;
    const out = new Map<string, ProbeResult>();
    if (this.unanswered) return out;
    for (const p of probes) {
      const log = this.broker[p.topic]?.[p.partition]?.log ?? {};
      const data = (from: number, until: number) => {
        const found: { offset: string; timestampMs: number }[] = [];
        for (let o = from; o < until; o++) {
          const e = log[o] ?? { timestampMs: 0 };
          if (typeof e === "object") found.push({ offset: String(o), timestampMs: e.timestampMs });
        }
        return found;
      };
      const [from, at, until] = [Number(p.fromOffset), Number(p.offset), Number(p.untilOffset)];
      const before = data(from, at);
      const after = data(at, until);
      out.set(topicPartitionKey(p.topic, p.partition), {
        before: from < at ? (before.at(-1) ?? null) : undefined,
        atOrAfter: at < until ? (after[0] ?? null) : undefined,
        ...(p.countDataRecords ? { dataRecords: after.length } : {}),
      });
    }
    return out;
  }
}

/** Both lag ports over one fake broker. */
export function fakeLagPorts(broker: FakeBroker): { offsets: FakeOffsets; timestamps: FakeTimestamps } {
  return { offsets: new FakeOffsets(broker), timestamps: new FakeTimestamps(broker) };
}
