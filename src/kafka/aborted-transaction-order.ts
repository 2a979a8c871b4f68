import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * Works around a kafkajs 2.2.4 read_committed bug: `filterAbortedMessages` walks a fetch response's
 * aborted-transaction list assuming it is sorted by `firstOffset`, but the broker returns it in
 * transaction-index order, which is the order the transactions were *aborted*. When a transaction
 * that started earlier is aborted later than another one, the messages of the earlier one are not
 * filtered, and a "read_committed" consumer returns aborted records. The Java client keeps these in
 * a priority queue ordered by first offset. This matters here because partition owners are fenced all
 * the time, which aborts transactions of several producers that overlap on the results, dead-letter
 * and changelog partitions.
 *
 * The fix sorts each partition's `abortedTransactions` by `firstOffset` right after a Fetch
 * response is decoded. It wraps `decode` on kafkajs's cached response modules, which kafkajs calls
 * through the module object on every request, so it applies to clients created before or after.
 * Idempotent. See test/integration/processor-aborted-order.test.ts.
 */
let applied = false;

interface AbortedTransaction {
  producerId: string;
  firstOffset: string;
}

interface DecodedFetch {
  responses?: { partitions?: { abortedTransactions?: AbortedTransaction[] | null }[] }[];
}

export function fixAbortedTransactionOrder(): void {
  if (applied) return;
  applied = true;
  const require = createRequire(import.meta.url);
  const root = dirname(require.resolve("kafkajs"));
  // Fetch v4 introduced aborted transactions; kafkajs 2.2.4 speaks up to v11.
  for (let v = 4; v <= 11; v++) {
    let mod: { decode?: (raw: Buffer) => Promise<DecodedFetch> };
    try {
      mod = require(join(root, "src", "protocol", "requests", "fetch", `v${v}`, "response.js"));
    } catch {
      continue; // a kafkajs without this version: nothing to patch
    }
    const original = mod.decode;
    if (typeof original !== "function") continue;
    mod.decode = async (raw: Buffer) => {
      const decoded = await original(raw);
      for (const response of decoded.responses ?? []) {
        for (const partition of response.partitions ?? []) {
          const aborted = partition.abortedTransactions;
          if (aborted && aborted.length > 1) {
            aborted.sort((a, b) => {
              const d = BigInt(a.firstOffset) - BigInt(b.firstOffset);
              return d < 0n ? -1 : d > 0n ? 1 : 0;
            });
          }
        }
      }
      return decoded;
    };
  }
}
