import { randomBytes } from "node:crypto";
import type { Consumer, Kafka } from "kafkajs";
import { topicPartitionKey } from "../contracts/topic-partition.js";
import type {
  ProbedRecord,
  ProbeResult,
  RecordTimestampReader,
  TimestampProbe,
} from "../observability/record-timestamp-reader.js";
import { SluiceError } from "../sluice-error.js";
import { kafkaFailure } from "./kafka-failure.js";

/** Group-id prefix of the throwaway groups that read record timestamps (needs a PREFIXED READ ACL). */
export const TIMESTAMP_PROBE_GROUP_PREFIX = "sluice-timestamp-probe-";

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
  done: boolean;
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
 * kafkajs has no single-record fetch and no manual assignment (tulios/kafkajs#373), so each
 * `read()` joins a throwaway consumer group (no offsets are ever committed, so it leaves nothing
 * behind but an empty group the broker expires), seeks every probed partition to its start offset
 * from the GROUP_JOIN handler — before the first fetch, so no fetch from "latest" can race the
 * seek — pauses every partition it was not asked about and each probed one as soon as it is answered.
 * It reads `read_committed`, so aborted records are skipped; batches holding only transaction
 * markers arrive through the START_BATCH_PROCESS instrumentation event and still move the probe on.
 * Cost: one JoinGroup/SyncGroup and one fetch per call, however many partitions are probed; a
 * counting probe (`countDataRecords`) reads its whole look-ahead, a fetch per 64 KiB.
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
        done: false,
      };
      st.done = from === until;
      states.set(topicPartitionKey(probe.topic, probe.partition), st);
    }
    const pending = [...states.values()].filter((st) => !st.done);
    if (pending.length > 0) await this.fetch(states, pending, timeoutMs);
    const results = new Map<string, ProbeResult>();
    for (const [k, st] of states) results.set(k, resultOf(st));
    return results;
  }

  private async fetch(
    states: Map<string, ProbeState>,
    pending: ProbeState[],
    timeoutMs: number,
  ): Promise<void> {
    const consumer: Consumer = this.kafka.consumer({
      groupId: `${TIMESTAMP_PROBE_GROUP_PREFIX}${randomBytes(6).toString("hex")}`,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: 250,
      // A small first batch is enough: we want a record or two, not throughput.
      maxBytesPerPartition: 64 * 1024,
      retry: { retries: 2 },
    });
    let settle: () => void = () => {};
    const allDone = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const finish = (st: ProbeState) => {
      if (st.done) return;
      st.done = true;
      consumer.pause([{ topic: st.probe.topic, partitions: [st.probe.partition] }]);
      if (pending.every((s) => s.done)) settle();
    };
    const moved = (st: ProbeState, lastOffset: bigint) => {
      if (lastOffset > st.reached) st.reached = lastOffset;
      if (st.reached + 1n >= st.until) finish(st);
    };

    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      // Runs inside joinAndSync, before the first fetch: the seeks below win over "latest".
      const assignment = payload.memberAssignment as Record<string, number[]>;
      for (const [topic, partitions] of Object.entries(assignment)) {
        const idle = partitions.filter((p) => states.get(topicPartitionKey(topic, p))?.done !== false);
        if (idle.length > 0) consumer.pause([{ topic, partitions: idle }]);
      }
      for (const st of pending) {
        if (!st.done)
          consumer.seek({
            topic: st.probe.topic,
            partition: st.probe.partition,
            offset: st.probe.fromOffset,
          });
      }
    });
    consumer.on(consumer.events.START_BATCH_PROCESS, ({ payload }) => {
      // Batches with no deliverable message (markers, aborted data) never reach eachBatch.
      if (payload.batchSize > 0) return;
      const st = states.get(topicPartitionKey(payload.topic, payload.partition));
      if (st && !st.done) moved(st, BigInt(payload.lastOffset));
    });

    const timer = setTimeout(settle, timeoutMs);
    try {
      await consumer.connect();
      await consumer.subscribe({
        topics: [...new Set(pending.map((st) => st.probe.topic))],
        fromBeginning: false,
      });
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          const st = states.get(topicPartitionKey(batch.topic, batch.partition));
          if (!st || st.done) return;
          for (const m of batch.messages) {
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
              finish(st);
              return;
            }
          }
          moved(st, BigInt(batch.lastOffset()));
        },
      });
      await allDone;
    } catch (cause) {
      const failure = kafkaFailure(cause, {
        doing: "reading record timestamps (lag seconds)",
        kafka: this.kafka,
        access: [
          { operation: "READ", resourceType: "GROUP", names: [TIMESTAMP_PROBE_GROUP_PREFIX], prefixed: true },
          {
            operation: "READ",
            resourceType: "TOPIC",
            names: [...new Set(pending.map((st) => st.probe.topic))],
          },
        ],
      });
      if (failure) throw failure;
      throw new SluiceError(
        "BROKER_UNAVAILABLE",
        `Could not read record timestamps: ${(cause as Error).message}`,
        {
          retriable: true,
          cause,
        },
      );
    } finally {
      clearTimeout(timer);
      await consumer.disconnect().catch(() => {});
    }
  }
}
