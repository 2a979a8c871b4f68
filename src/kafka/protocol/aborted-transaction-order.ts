import { fixFetchDecoding } from "./fetch-decoding.js";
import { kafkajsModule } from "./kafkajs-module.js";

/**
 * Replaces kafkajs 2.2.4's read_committed filtering of aborted records with the Java client's
 * algorithm, because kafkajs's returns aborted records to "read_committed" consumers.
 *
 * kafkajs (`src/consumer/filterAbortedMessages.js`, lines 40-51, called from `src/consumer/batch.js`
 * line 30) walks the fetch response's aborted-transaction list once, in list order, and moves at most
 * ONE aborted transaction into its "aborted producers" set per message (`if`, not `while`). Two ways
 * that goes wrong, both routine here because fencing aborts several producers' overlapping
 * transactions on the same results, dead-letter and changelog partitions:
 * - the broker lists aborted transactions in the order they were aborted, not by first offset, so a
 *   transaction that started earlier but was aborted later is reached too late;
 * - when a fetch starts inside several aborted transactions (a seek, a restart from a committed
 *   offset, a small fetch), only the first one is activated at the first message, and the next
 *   message of another aborted producer is delivered. The reviewer's case: P1 x1@0, P2 y1@1 y2@2,
 *   P1 x2@3, both aborted; a consumer fetching from offset 2 received y2.
 *
 * The Java client (`clients/.../consumer/internals/CompletedFetch.java`, `nextFetchedRecord`,
 * `consumeAbortedTransactionsUpTo`, `isBatchAborted`, `containsAbortMarker`) puts the list in a
 * priority queue by first offset and, per record batch that has a producer id: moves EVERY aborted
 * transaction with firstOffset <= the batch's last offset into `abortedProducerIds`; then if the batch
 * is a control batch whose first record is an ABORT marker, removes its producer id; otherwise skips
 * the batch if it is transactional and its producer id is in the set. That is what `filterPartition`
 * below does.
 *
 * Where: we wrap `decode` on kafkajs's Fetch v4..v11 response modules (kafkajs calls it through the
 * module object, `src/protocol/requests/fetch/index.js`, on every request, so clients created before
 * or after are covered). The decoded records still carry their batch's `batchContext` (producerId,
 * inTransaction, isControlBatch, firstOffset, lastOffsetDelta: `src/protocol/recordBatch/v0/decoder.js`)
 * and control records their key (version int16, type int16; type 0 = ABORT). Aborted records are
 * flagged `isControlRecord = true` rather than removed: `batch.js` (line 33) drops control records from
 * what the application sees but keeps them in `rawMessages`/`messagesWithinOffset`, which drive
 * `lastOffset()` and `isEmptyDueToFiltering()` (lines 48-89), so the consumer still advances past
 * a fetch that held only aborted records (exactly what kafkajs does with records its own filter
 * drops). Then `abortedTransactions` is set to `[]`, which makes kafkajs's own filter a no-op
 * (filterAbortedMessages.js line 36).
 *
 * Applied once per process (a marker on the wrapped function, shared across module instances through
 * `Symbol.for`); the name is historical (the first version only sorted the list). See
 * test/integration/kafkajs-read-committed.test.ts and processor-aborted-order.test.ts.
 */
const WRAPPED = Symbol.for("sluice.kafkajs.readCommittedFilter");

interface AbortedTransaction {
  producerId: string;
  firstOffset: string;
}

/** What kafkajs's record batch decoder attaches to every record of a batch (one object per batch). */
interface BatchContext {
  firstOffset?: string;
  lastOffsetDelta?: number;
  producerId?: string;
  inTransaction?: boolean;
  isControlBatch?: boolean;
}

interface DecodedRecord {
  key?: Buffer | null;
  isControlRecord?: boolean;
  batchContext?: BatchContext;
}

interface DecodedPartition {
  abortedTransactions?: AbortedTransaction[] | null;
  messages?: DecodedRecord[];
}

interface DecodedFetch {
  responses?: { partitions?: DecodedPartition[] }[];
}

type Decode = ((raw: Buffer) => Promise<DecodedFetch>) & { [WRAPPED]?: true };

/** Control record key: version (int16) then type (int16); ControlRecordType.ABORT is 0. */
function isAbortMarker(record: DecodedRecord): boolean {
  const key = record.key;
  return key != null && key.length >= 4 && key.readInt16BE(2) === 0;
}

/** The Java client's per-fetch filter (CompletedFetch), applied to one decoded partition. */
function filterPartition(partition: DecodedPartition): void {
  const aborted = partition.abortedTransactions;
  if (!aborted || aborted.length === 0) return; // read_uncommitted, or nothing aborted in range
  const queue = aborted
    .map((t) => ({ producerId: t.producerId, firstOffset: BigInt(t.firstOffset) }))
    .sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0));
  let next = 0;
  const abortedProducerIds = new Set<string>();
  let batch: BatchContext | undefined;
  let skipBatch = false;
  for (const record of partition.messages ?? []) {
    const context = record.batchContext;
    // Legacy (magic < 2) message sets have no batch context and cannot be transactional.
    if (!context) continue;
    if (context !== batch) {
      batch = context;
      skipBatch = false;
      const producerId = context.producerId;
      if (producerId !== undefined && BigInt(producerId) >= 0n) {
        const lastOffset = BigInt(context.firstOffset ?? "0") + BigInt(context.lastOffsetDelta ?? 0);
        for (let txn = queue[next]; txn && txn.firstOffset <= lastOffset; txn = queue[++next]) {
          abortedProducerIds.add(txn.producerId);
        }
        if (context.isControlBatch) {
          // Java reads only the batch's first record; a control batch holds exactly one.
          if (isAbortMarker(record)) abortedProducerIds.delete(producerId);
        } else if (context.inTransaction && abortedProducerIds.has(producerId)) {
          skipBatch = true;
        }
      }
    }
    if (skipBatch) record.isControlRecord = true; // hidden from the app, still advances the offset
  }
  partition.abortedTransactions = [];
}

export function fixAbortedTransactionOrder(): void {
  // The filter wraps the decode it finds: the one-pass decoder goes in first, underneath it.
  fixFetchDecoding();
  // Fetch v4 introduced aborted transactions; kafkajs 2.2.4 speaks up to v11. Some versions re-export
  // an older version's decode (v6 = v5, v9 = v8, v10 = v9): the marker keeps those from being wrapped
  // twice, and the filter is idempotent anyway (it empties the list it consumed).
  for (let v = 4; v <= 11; v++) {
    let mod: { decode?: Decode };
    try {
      mod = kafkajsModule("protocol", "requests", "fetch", `v${v}`, "response.js");
    } catch {
      continue; // a kafkajs without this version: nothing to patch
    }
    const original = mod.decode;
    if (typeof original !== "function" || original[WRAPPED]) continue;
    const wrapped: Decode = async (raw: Buffer) => {
      const decoded = await original(raw);
      for (const response of decoded.responses ?? []) {
        for (const partition of response.partitions ?? []) filterPartition(partition);
      }
      return decoded;
    };
    wrapped[WRAPPED] = true;
    mod.decode = wrapped;
  }
}
