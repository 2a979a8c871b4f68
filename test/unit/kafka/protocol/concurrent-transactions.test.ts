import { describe, expect, it } from "vitest";
import {
  FIRST_RETRY_MS,
  MAX_RETRY_MS,
  RETRY_FOR_MS,
  retryConcurrentTransactions,
} from "../../../../src/kafka/protocol/concurrent-transactions.js";

const concurrent = () =>
  Object.assign(new Error("another concurrent operation"), { type: "CONCURRENT_TRANSACTIONS" });

/** A stand-in for kafkajs's Broker whose AddPartitionsToTxn is refused `refusals` times. */
function fakeBroker(refusals: number, error: () => Error = concurrent) {
  const waits: number[] = [];
  class Broker {
    calls = 0;
    async addPartitionsToTxn(request: { transactionalId: string }) {
      this.calls++;
      if (this.calls <= refusals) throw error();
      return { ok: request.transactionalId };
    }
    async addOffsetsToTxn() {
      this.calls++;
      if (this.calls <= refusals) throw error();
      return "offsets";
    }
    async initProducerId() {
      this.calls++;
      if (this.calls <= refusals) throw error();
      return { producerId: "7", producerEpoch: 1 };
    }
  }
  retryConcurrentTransactions(Broker as unknown as { prototype: Record<string, unknown> }, async (ms) => {
    waits.push(ms);
  });
  return { broker: new Broker(), waits };
}

describe("retryConcurrentTransactions", () => {
  it("sends AddPartitionsToTxn again after 2, 4, 8, 16, 20, 20 … ms while the coordinator completes the last transaction", async () => {
    const { broker, waits } = fakeBroker(7);
    await expect(broker.addPartitionsToTxn({ transactionalId: "t" })).resolves.toEqual({ ok: "t" });
    expect(broker.calls).toBe(8);
    expect(FIRST_RETRY_MS).toBe(2);
    expect(waits).toEqual([2, 4, 8, 16, MAX_RETRY_MS, MAX_RETRY_MS, MAX_RETRY_MS]);
  });

  it("does the same for AddOffsetsToTxn", async () => {
    const { broker } = fakeBroker(1);
    await expect(broker.addOffsetsToTxn()).resolves.toBe("offsets");
    expect(broker.calls).toBe(2);
  });

  it("does the same for InitProducerId (a new owner while the coordinator aborts the old owner's transaction)", async () => {
    const { broker, waits } = fakeBroker(3);
    await expect(broker.initProducerId()).resolves.toEqual({ producerId: "7", producerEpoch: 1 });
    expect(broker.calls).toBe(4);
    expect(waits).toEqual([2, 4, 8]);
  });

  it("hands the error to kafkajs's own retries after RETRY_FOR_MS", async () => {
    const { broker, waits } = fakeBroker(Number.POSITIVE_INFINITY);
    await expect(broker.addPartitionsToTxn({ transactionalId: "t" })).rejects.toMatchObject({
      type: "CONCURRENT_TRANSACTIONS",
    });
    const total = waits.reduce((a, b) => a + b, 0);
    expect(total).toBeLessThanOrEqual(RETRY_FOR_MS);
    expect(total + MAX_RETRY_MS).toBeGreaterThan(RETRY_FOR_MS);
  });

  it("passes any other error on at once", async () => {
    const { broker, waits } = fakeBroker(1, () =>
      Object.assign(new Error("fenced"), { type: "PRODUCER_FENCED" }),
    );
    await expect(broker.addPartitionsToTxn({ transactionalId: "t" })).rejects.toThrow("fenced");
    expect(broker.calls).toBe(1);
    expect(waits).toEqual([]);
  });
});
