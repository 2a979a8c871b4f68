import { encodeRunCostShare, type RunCostShare, runCostShareKey } from "../contracts/run-cost-share.js";
import type { OutboundMessage, RecordCompletion } from "./outbound-message.js";

/**
 * Key of the offset checkpoint record that every partition transaction writes to its changelog
 * partition (value: next input offset, decimal). Why it exists: kafkajs cannot send OffsetFetch with
 * `require_stable` (v7+, KIP-447), and the group coordinator materialises a committed transaction's
 * offsets asynchronously, so right after fencing the previous owner an OffsetFetch may still return
 * the older offset. The changelog is read `read_committed` after the fence, when the commit marker is
 * already in that partition, so this record is always current (src/kafka/read/changelog-reader.ts). 0xFF
 * never occurs in UTF-8, so the key cannot collide with a request id.
 */
export const OFFSET_CHECKPOINT_KEY: Buffer = Buffer.concat([
  Buffer.from([0xff]),
  Buffer.from("sluice.next-offset"),
]);

/** What one partition transaction carries, beside its consumer offset (`transactionRecords`). */
export interface TransactionRecordsInput {
  topic: string;
  partition: number;
  /** The consumer offset the transaction commits (last covered offset + 1, decimal). */
  nextOffset: string;
  completions: readonly RecordCompletion[];
  /** The dedup changelog's records for this transaction (dedup-changelog.ts); unset: none. */
  changelog?: readonly OutboundMessage[] | undefined;
  /** Attached units (`PartitionCommitter.attach`) that ride with this transaction. */
  riding: readonly { outputs: readonly OutboundMessage[]; bookkeeping: readonly OutboundMessage[] }[];
  /** `topics.runs`, when backfill rows' cost shares are written; unset: none. */
  runCostTopic?: string | undefined;
  /** Where the offset checkpoint goes (the changelog partition); unset: none. */
  offsetCheckpoint?: { topic: string; partition: number } | undefined;
}

/**
 * The records of one partition transaction, in the order the publisher numbers them: outputs (the
 * completions' outputs, riding attached outputs, the runs' cost shares), then bookkeeping (dedup
 * changelog records, attached bookkeeping, the offset checkpoint). Bookkeeping is separate because
 * at-least-once publishes it only after the outputs are durable (a changelog entry must never stand
 * for an unpublished result). Pure.
 */
export function transactionRecords(t: TransactionRecordsInput): {
  outputs: OutboundMessage[];
  bookkeeping: OutboundMessage[];
} {
  const outputs: OutboundMessage[] = [];
  const bookkeeping: OutboundMessage[] = [];
  for (const c of t.completions) outputs.push(...c.outputs);
  if (t.changelog !== undefined) bookkeeping.push(...t.changelog);
  for (const a of t.riding) {
    outputs.push(...a.outputs);
    bookkeeping.push(...a.bookkeeping);
  }
  if (t.runCostTopic !== undefined) {
    for (const share of runCostShares(t.completions, t.topic, t.partition, t.nextOffset)) {
      outputs.push({ topic: t.runCostTopic, key: runCostShareKey(share), value: encodeRunCostShare(share) });
    }
  }
  if (t.offsetCheckpoint) {
    bookkeeping.push({
      topic: t.offsetCheckpoint.topic,
      partition: t.offsetCheckpoint.partition,
      key: OFFSET_CHECKPOINT_KEY,
      value: t.nextOffset,
    });
  }
  return { outputs, bookkeeping };
}

/** The runs' shares of one transaction's completions, one per run id, in first-seen order. Pure. */
export function runCostShares(
  completions: readonly RecordCompletion[],
  topic: string,
  partition: number,
  nextOffset: string,
): RunCostShare[] {
  const byRun = new Map<string, RunCostShare>();
  for (const c of completions) {
    const cost = c.runCost;
    if (cost === undefined) continue;
    let share = byRun.get(cost.runId);
    if (share === undefined) {
      share = {
        kind: "sluice.run-cost-share",
        runId: cost.runId,
        topic,
        partition,
        nextOffset,
        items: 0,
        tokens: 0,
        modelCpuMs: 0,
      };
      byRun.set(cost.runId, share);
    }
    share.items += cost.items;
    share.tokens += cost.tokens;
    share.modelCpuMs += cost.cpuMs;
  }
  return [...byRun.values()];
}
