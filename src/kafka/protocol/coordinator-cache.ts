import { kafkajsModule } from "./kafkajs-module.js";

/**
 * kafkajs 2.2.4 asks a broker for a group or transaction coordinator (a FindCoordinator round trip)
 * every time it needs one (`src/cluster/index.js`, `findGroupCoordinator`: no cache). A
 * transactional producer needs one four times per transaction (`src/producer/eosManager/index.js`:
 * AddPartitionsToTxn, AddOffsetsToTxn and EndTxn each look up the transaction coordinator, and
 * TxnOffsetCommit the group coordinator), so each of Sluice's transactions paid nine sequential
 * round trips where five do the work; admin offset reads paid one more each. The Java client keeps
 * the coordinator until a request to it fails.
 *
 * The correction does the same: `findGroupCoordinator` remembers, per Cluster, which node was the
 * coordinator of a (group or transactional id, coordinator type), and answers the next lookup with
 * that node's broker from kafkajs's own pool (`findBroker`, which connects it if needed) without a
 * request. Any failed request of a coordinator API on a broker (a moved coordinator answers
 * NOT_COORDINATOR; a lost connection, a fenced producer, a rebalance) marks that broker's answers
 * stale, so the next lookup asks a broker again, exactly as kafkajs always did; kafkajs's own
 * retries, which look the coordinator up again after such errors, then find the new one. A broker
 * the pool replaced (new metadata) is never answered from the cache.
 *
 * A lookup by a client that has not fetched metadata yet (an admin right after `connect()`: its pool
 * holds only the seed broker) failed at once in kafkajs ("No brokers in the broker pool"), refreshed
 * the metadata and waited its retry, ~300 ms, before asking again: every fresh admin whose first
 * request goes to a coordinator paid that (a partition restore's offset read at every start and
 * scale event, `sluice status`'s group describe). A cache miss on such a client refreshes the
 * metadata first, as kafkajs's own producer does before its first lookup (`initProducerId`); should
 * that refresh fail, kafkajs's lookup and its retries run exactly as before.
 *
 * Where: `findGroupCoordinator` on kafkajs's Cluster class and the coordinator APIs on its Broker
 * class (their prototypes, shared by every client). Applied once per process by `createKafka`;
 * see test/unit/kafka/protocol/coordinator-cache.test.ts and
 * test/integration/kafkajs-coordinator-cache.test.ts.
 */
const WRAPPED = Symbol.for("sluice.kafkajs.coordinatorCache");
const CACHE = Symbol.for("sluice.kafkajs.coordinatorCacheEntries");
const FAILURES = Symbol.for("sluice.kafkajs.coordinatorFailures");

/** The Broker APIs that go to a group or transaction coordinator. */
export const COORDINATOR_APIS = [
  "initProducerId",
  "addPartitionsToTxn",
  "addOffsetsToTxn",
  "txnOffsetCommit",
  "endTxn",
  "joinGroup",
  "syncGroup",
  "heartbeat",
  "leaveGroup",
  "offsetCommit",
  "offsetFetch",
  "describeGroups",
  "deleteGroups",
] as const;

interface Broker {
  nodeId?: number | string;
  /** How many coordinator requests to this broker failed so far. */
  [FAILURES]?: number;
}

interface CacheEntry {
  nodeId: number | string;
  broker: Broker;
  failures: number;
}

interface CoordinatorQuery {
  groupId: string;
  coordinatorType?: number;
}

interface Cluster {
  findBroker(node: { nodeId: number | string }): Promise<Broker>;
  refreshMetadata?(): Promise<void>;
  /** kafkajs's pool: `metadata` stays null until the client's first metadata refresh. */
  brokerPool?: { metadata?: unknown };
  [CACHE]?: Map<string, CacheEntry>;
}

type FindCoordinator = (this: Cluster, query: CoordinatorQuery) => Promise<Broker>;
type BrokerMethod = (this: Broker, ...args: unknown[]) => Promise<unknown>;

/** The broker's answers count as stale from now on: the next lookup asks a broker again. */
function markFailed(broker: Broker): void {
  broker[FAILURES] = (broker[FAILURES] ?? 0) + 1;
}

/** The cached coordinator of `key`, if it is still the pool's broker and nothing failed on it since. */
async function cached(cluster: Cluster, key: string): Promise<Broker | undefined> {
  const entry = cluster[CACHE]?.get(key);
  if (entry === undefined) return undefined;
  if ((entry.broker[FAILURES] ?? 0) === entry.failures) {
    try {
      const broker = await cluster.findBroker({ nodeId: entry.nodeId });
      if (broker === entry.broker) return broker;
    } catch {
      // Not in the pool any more: ask again.
    }
  }
  cluster[CACHE]?.delete(key);
  return undefined;
}

/** Wraps `findGroupCoordinator` on `ClusterClass` and the coordinator APIs on `BrokerClass`; idempotent. */
export function cacheCoordinators(
  ClusterClass: { prototype: { findGroupCoordinator: FindCoordinator; [WRAPPED]?: true } },
  BrokerClass: { prototype: Record<string, unknown> & { [WRAPPED]?: true } },
): void {
  const clusterProto = ClusterClass.prototype;
  if (!clusterProto[WRAPPED]) {
    const find = clusterProto.findGroupCoordinator;
    clusterProto.findGroupCoordinator = async function (this: Cluster, query: CoordinatorQuery) {
      const key = `${query.coordinatorType ?? 0}\u0000${query.groupId}`;
      const hit = await cached(this, key);
      if (hit !== undefined) return hit;
      if (this.brokerPool !== undefined && this.brokerPool.metadata == null)
        await this.refreshMetadata?.().catch(() => undefined);
      const broker = await find.call(this, query);
      if (broker?.nodeId !== undefined) {
        this[CACHE] ??= new Map();
        this[CACHE].set(key, { nodeId: broker.nodeId, broker, failures: broker[FAILURES] ?? 0 });
      }
      return broker;
    };
    clusterProto[WRAPPED] = true;
  }
  const brokerProto = BrokerClass.prototype;
  if (!brokerProto[WRAPPED]) {
    for (const name of COORDINATOR_APIS) {
      const method = brokerProto[name];
      if (typeof method !== "function") continue; // a kafkajs without this API: nothing to mark
      brokerProto[name] = async function (this: Broker, ...args: unknown[]) {
        try {
          return await (method as BrokerMethod).apply(this, args);
        } catch (error) {
          markFailed(this);
          throw error;
        }
      };
    }
    brokerProto[WRAPPED] = true;
  }
}

/** The correction on kafkajs's own Cluster and Broker classes (see the module comment). */
export function fixCoordinatorLookups(): void {
  cacheCoordinators(
    kafkajsModule("cluster", "index.js"),
    kafkajsModule<{ prototype: Record<string, unknown> }>("broker", "index.js"),
  );
}
