import { kafkajsModule } from "./kafkajs-module.js";

/**
 * The transaction coordinator answers CONCURRENT_TRANSACTIONS while it is still completing the
 * producer's previous transaction (writing its markers after EndTxn returned). A producer that
 * starts its next transaction at once gets it on that transaction's first AddPartitionsToTxn (or
 * AddOffsetsToTxn), typically for a few milliseconds. kafkajs 2.2.4 treats it as any retriable
 * error: its send fails, it refreshes the metadata and tries again after the producer's retry
 * back-off (`initialRetryTime`, 300 ms ± 20 % by default; `src/producer/sendMessages.js`). The
 * Java producer retries this case after 20 ms (`TransactionManager`, `ADD_PARTITIONS_RETRY_BACKOFF_MS`).
 *
 * A new owner of a transactional id meets the same answer on its InitProducerId while the coordinator
 * aborts the transaction the previous owner left open (a partition moved to another instance, or an
 * instance restarted): kafkajs's producer then waits out its retry back-off too
 * (`src/producer/eosManager/index.js`, `initProducerId`), at every such takeover.
 *
 * The correction retries sooner still: AddPartitionsToTxn, AddOffsetsToTxn and InitProducerId answered
 * with CONCURRENT_TRANSACTIONS are sent again after 2 ms, then 4, 8, 16 and every 20 ms, for at most
 * `RETRY_FOR_MS`; after that the error goes to kafkajs's own retries as before. (Measured on the
 * local broker, BENCHMARKS.md "Coordinator lookups and CONCURRENT_TRANSACTIONS": a flat 20 ms made
 * back-to-back transactions slower than a FindCoordinator round trip in front of each, which gave
 * the coordinator the few ms it needs.) Nothing else changes: the same requests, the
 * same state machine.
 *
 * Where: `addPartitionsToTxn`, `addOffsetsToTxn` and `initProducerId` on kafkajs's Broker class (its
 * prototype, shared by every client). Applied once per process by `createKafka`; see
 * test/integration/kafkajs-coordinator-cache.test.ts (back-to-back transactions and a takeover on the
 * real broker).
 */
const WRAPPED = Symbol.for("sluice.kafkajs.concurrentTransactions");

/**
 * Waits before sending a request the coordinator refused with CONCURRENT_TRANSACTIONS again, ms: the
 * first short (a local coordinator completes a transaction in a few ms), then doubling up to the Java
 * producer's 20 ms.
 */
export const FIRST_RETRY_MS = 2;
export const MAX_RETRY_MS = 20;
/** How long those fast retries go on before the error goes to kafkajs's retries, ms. */
export const RETRY_FOR_MS = 1000;

const METHODS = ["addPartitionsToTxn", "addOffsetsToTxn", "initProducerId"] as const;

type BrokerMethod = (this: unknown, ...args: unknown[]) => Promise<unknown>;

function isConcurrentTransactions(error: unknown): boolean {
  return (error as { type?: unknown } | null)?.type === "CONCURRENT_TRANSACTIONS";
}

/** Wraps the three methods on `BrokerClass`'s prototype; idempotent. `sleep` is a seam for tests. */
export function retryConcurrentTransactions(
  BrokerClass: { prototype: Record<string, unknown> & { [WRAPPED]?: true } },
  sleep: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
): void {
  const proto = BrokerClass.prototype;
  if (proto[WRAPPED]) return;
  for (const name of METHODS) {
    const method = proto[name];
    if (typeof method !== "function") continue; // a kafkajs without it: nothing to wrap
    proto[name] = async function (this: unknown, ...args: unknown[]) {
      for (let waited = 0, wait = FIRST_RETRY_MS; ; waited += wait, wait = Math.min(2 * wait, MAX_RETRY_MS)) {
        try {
          return await (method as BrokerMethod).apply(this, args);
        } catch (error) {
          if (!isConcurrentTransactions(error) || waited + wait > RETRY_FOR_MS) throw error;
          await sleep(wait);
        }
      }
    };
  }
  proto[WRAPPED] = true;
}

/** The correction on kafkajs's own Broker class (see the module comment). */
export function fixConcurrentTransactionsRetry(): void {
  retryConcurrentTransactions(kafkajsModule<{ prototype: Record<string, unknown> }>("broker", "index.js"));
}
