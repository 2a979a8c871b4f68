import { describe, expect, it } from "vitest";
import { decodeRunCostShare, type RunCostShare } from "../../../src/contracts/run-cost-share.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import {
  PartitionCommitter,
  type PublishUnit,
  type ResultPublisher,
} from "../../../src/delivery/partition-committer.js";
import { runCostShares } from "../../../src/delivery/transaction-records.js";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { sumRunCostShares } from "../../../src/runs/run-cost-total.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { FakeClock } from "../../support/fake-clock.js";

function row(id: string, runId: string | undefined, cpuMs: number, tokens: number): RecordCompletion {
  return {
    outputs: [{ topic: "results", key: id, value: "{}" }],
    outcome: "result",
    status: "ok",
    recordTimestampMs: 1,
    ...(runId ? { runCost: { runId, items: 1, tokens, cpuMs } } : {}),
  };
}

class RecordingPublisher implements ResultPublisher {
  readonly units: PublishUnit[] = [];
  /** Publishes fail (an abort) while this is true. */
  failing = false;
  async publish(unit: PublishUnit): Promise<void> {
    if (this.failing) throw new SluiceError("TRANSACTION_FAILED", "aborted (fake)");
    this.units.push(unit);
  }
  async close(): Promise<void> {}
}

const settle = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

function committer(publisher: ResultPublisher, runCostTopic?: string) {
  return new PartitionCommitter(
    {
      topic: "corpus.backfill",
      partition: 2,
      events: new SluiceEvents(),
      commitIntervalMs: 0,
      maxTransactionRecords: 500,
      maxTransactionBytes: 524_288,
      onFailure: () => {},
      ...(runCostTopic ? { runCostTopic } : {}),
    },
    publisher,
    new FakeClock(),
  );
}

const sharesOf = (units: PublishUnit[]): RunCostShare[] =>
  units.flatMap((u) =>
    u.outputs.filter((m) => m.topic === "sluice.runs").map((m) => decodeRunCostShare(m.value)!),
  );

describe("backfill run cost shares", () => {
  it("attributes a transaction's rows to their runs: one share per run id, online rows in none", () => {
    const shares = runCostShares(
      [row("a", "run-1", 2, 10), row("b", undefined, 5, 7), row("c", "run-2", 1, 4), row("d", "run-1", 3, 6)],
      "corpus.backfill",
      2,
      "105",
    );
    expect(shares).toEqual([
      {
        kind: "sluice.run-cost-share",
        runId: "run-1",
        topic: "corpus.backfill",
        partition: 2,
        nextOffset: "105",
        items: 2,
        tokens: 16,
        modelCpuMs: 5,
      },
      {
        kind: "sluice.run-cost-share",
        runId: "run-2",
        topic: "corpus.backfill",
        partition: 2,
        nextOffset: "105",
        items: 1,
        tokens: 4,
        modelCpuMs: 1,
      },
    ]);
  });

  it("writes each run's share in the same unit as the rows it accounts for, keyed by the unit's offset", async () => {
    const publisher = new RecordingPublisher();
    const c = committer(publisher, "sluice.runs");
    for (const [offset, r] of [
      ["10", row("a", "run-1", 2, 10)],
      ["11", row("b", "run-1", 4, 5)],
    ] as const) {
      c.track(offset);
      c.complete(offset, r);
      await settle();
    }
    expect(publisher.units).toHaveLength(2);
    for (const unit of publisher.units) {
      const share = unit.outputs.find((m) => m.topic === "sluice.runs")!;
      expect(String(share.key)).toBe(`cost/run-1/corpus.backfill/2/${unit.nextOffset}`);
      expect(unit.outputs.filter((m) => m.topic === "results")).toHaveLength(1);
    }
    expect(sumRunCostShares("run-1", sharesOf(publisher.units))).toEqual({
      items: 2,
      tokens: 15,
      modelCpuMs: 6,
    });
    // Without a runs topic (online partitions), no shares.
    const plain = new RecordingPublisher();
    const p = committer(plain);
    p.track("1");
    p.complete("1", row("x", "run-1", 1, 1));
    await settle();
    expect(plain.units[0]!.outputs.map((m) => m.topic)).toEqual(["results"]);
  });

  it("sums a run's committed shares once each: a share read twice counts once, other runs not at all", () => {
    const share = (runId: string, nextOffset: string, items: number): RunCostShare => ({
      kind: "sluice.run-cost-share",
      runId,
      topic: "t",
      partition: 0,
      nextOffset,
      items,
      tokens: items * 10,
      modelCpuMs: items * 2,
    });
    const shares = [share("r", "5", 5), share("r", "5", 5), share("r", "9", 4), share("other", "3", 3)];
    expect(sumRunCostShares("r", shares)).toEqual({ items: 9, tokens: 90, modelCpuMs: 18 });
    expect(decodeRunCostShare(Buffer.from('{"formatVersion":1,"runId":"r"}'))).toBeNull();
    expect(decodeRunCostShare(null)).toBeNull();
    expect(decodeRunCostShare("not json")).toBeNull();
  });
});
