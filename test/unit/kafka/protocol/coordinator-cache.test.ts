import { describe, expect, it } from "vitest";
import { COORDINATOR_APIS, cacheCoordinators } from "../../../../src/kafka/protocol/coordinator-cache.js";

/**
 * The cache's rules on stand-ins for kafkajs's Cluster and Broker classes (the real ones are
 * exercised on the broker in test/integration/kafkajs-coordinator-cache.test.ts): one lookup per
 * (id, type), a new lookup after any failed coordinator request on that broker, and never a broker
 * the pool no longer holds.
 */
function fakes() {
  class Broker {
    fail = false;
    constructor(readonly nodeId: number) {}
    async endTxn(): Promise<string> {
      if (this.fail) throw new Error("NOT_COORDINATOR");
      return `endTxn on ${this.nodeId}`;
    }
  }
  for (const name of COORDINATOR_APIS)
    if (name !== "endTxn") (Broker.prototype as unknown as Record<string, unknown>)[name] = async () => name;
  class Cluster {
    lookups: string[] = [];
    coordinator = 1;
    pool = new Map<number, Broker>([
      [1, new Broker(1)],
      [2, new Broker(2)],
    ]);
    async findBroker({ nodeId }: { nodeId: number }): Promise<Broker> {
      const b = this.pool.get(nodeId);
      if (!b) throw Object.assign(new Error("not found"), { name: "KafkaJSBrokerNotFound" });
      return b;
    }
    async findGroupCoordinator({
      groupId,
      coordinatorType = 0,
    }: {
      groupId: string;
      coordinatorType?: number;
    }) {
      this.lookups.push(`${coordinatorType}:${groupId}`);
      return this.findBroker({ nodeId: this.coordinator });
    }
  }
  cacheCoordinators(Cluster as never, Broker as unknown as { prototype: Record<string, unknown> });
  return { Cluster, Broker };
}

describe("cacheCoordinators", () => {
  it("asks once per id and coordinator type, then answers from the cache", async () => {
    const { Cluster } = fakes();
    const cluster = new Cluster();
    for (let i = 0; i < 4; i++) {
      await cluster.findGroupCoordinator({ groupId: "txn-a", coordinatorType: 1 });
      await cluster.findGroupCoordinator({ groupId: "group" });
    }
    await cluster.findGroupCoordinator({ groupId: "txn-a" }); // another type: its own lookup
    expect(cluster.lookups).toEqual(["1:txn-a", "0:group", "0:txn-a"]);
    // Each cluster keeps its own.
    const other = new Cluster();
    await other.findGroupCoordinator({ groupId: "group" });
    expect(other.lookups).toEqual(["0:group"]);
  });

  it("asks again after a coordinator request failed on that broker, and finds the new coordinator", async () => {
    const { Cluster } = fakes();
    const cluster = new Cluster();
    const first = await cluster.findGroupCoordinator({ groupId: "txn", coordinatorType: 1 });
    expect(await first.endTxn()).toBe("endTxn on 1");
    // The coordinator moves to node 2: node 1 answers NOT_COORDINATOR.
    cluster.coordinator = 2;
    first.fail = true;
    await expect(first.endTxn()).rejects.toThrow("NOT_COORDINATOR");
    const second = await cluster.findGroupCoordinator({ groupId: "txn", coordinatorType: 1 });
    expect(second.nodeId).toBe(2);
    expect(await second.endTxn()).toBe("endTxn on 2");
    await cluster.findGroupCoordinator({ groupId: "txn", coordinatorType: 1 });
    expect(cluster.lookups).toEqual(["1:txn", "1:txn"]);
  });

  it("never answers with a broker the pool replaced or dropped", async () => {
    const { Cluster, Broker } = fakes();
    const cluster = new Cluster();
    await cluster.findGroupCoordinator({ groupId: "g" });
    cluster.pool.set(1, new Broker(1)); // new metadata: a new broker object for node 1
    const replaced = await cluster.findGroupCoordinator({ groupId: "g" });
    expect(replaced).toBe(cluster.pool.get(1));
    cluster.pool.delete(1);
    cluster.coordinator = 2;
    cluster.pool.set(2, new Broker(2));
    expect((await cluster.findGroupCoordinator({ groupId: "g" })).nodeId).toBe(2);
    expect(cluster.lookups).toEqual(["0:g", "0:g", "0:g"]);
  });

  it("a client without metadata yet fetches it before its first lookup, and only then", async () => {
    const { Cluster } = fakes();
    class FreshCluster extends Cluster {
      brokerPool: { metadata: unknown } = { metadata: null };
      refreshes = 0;
      async refreshMetadata(): Promise<void> {
        this.refreshes++;
        this.brokerPool.metadata = { brokers: [1, 2] };
      }
    }
    const cluster = new FreshCluster();
    await cluster.findGroupCoordinator({ groupId: "g" });
    await cluster.findGroupCoordinator({ groupId: "txn", coordinatorType: 1 });
    expect(cluster.refreshes).toBe(1);
    expect(cluster.lookups).toEqual(["0:g", "1:txn"]);
    // A failed refresh leaves the lookup to kafkajs, as before.
    const down = new FreshCluster();
    down.refreshMetadata = async () => {
      throw new Error("connection refused");
    };
    expect((await down.findGroupCoordinator({ groupId: "g" })).nodeId).toBe(1);
  });

  it("is idempotent: wrapping twice still asks once", async () => {
    const { Cluster, Broker } = fakes();
    cacheCoordinators(Cluster as never, Broker as unknown as { prototype: Record<string, unknown> });
    const cluster = new Cluster();
    await cluster.findGroupCoordinator({ groupId: "g" });
    await cluster.findGroupCoordinator({ groupId: "g" });
    expect(cluster.lookups).toEqual(["0:g"]);
  });
});
