import { describe, expect, it } from "vitest";
import { encodeRequest, RequestDecoder } from "../../../src/contracts/request-codec.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import { PartitionTask } from "../../../src/processor/partition-task.js";
import { RequestIntake } from "../../../src/processor/request-intake.js";
import { idleCommitter } from "../../support/idle-committer.js";

const committer = idleCommitter;

function runningTask(topic: string, lane: "online" | "backfill"): PartitionTask {
  const t = new PartitionTask({ topic, partition: 0 }, "cl", lane);
  t.installCommitter(committer);
  t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0");
  return t;
}

const intake = new RequestIntake({
  decoder: new RequestDecoder({ defaultCodec: "json", maxMessageBytes: 1_000_000 }),
  completions: new CompletionBuilder({
    resultsTopic: "res",
    deadLetterTopic: "dlq",
    encodeResult: () => ({ value: Buffer.from("{}"), headers: {} }),
    maxDeadLetterBytes: 100_000,
  }),
  model: { countTokens: () => 3 },
  clock: { now: () => 1000 },
  defaultTimeoutMs: 30_000,
});

function record(offset: number, headers: Record<string, string> = {}) {
  const encoded = encodeRequest({ id: `id-${offset}`, text: "hello" }, "json");
  return {
    offset: String(offset),
    key: null,
    value: encoded.value,
    headers: { ...encoded.headers, ...headers },
    timestamp: "1000",
  };
}

describe("RequestIntake lanes", () => {
  it("a work item carries its task's lane and the sluice.run-id header (undefined when absent)", () => {
    const backfill = intake.take(runningTask("bf", "backfill"), record(0, { "sluice.run-id": "run-7" }));
    expect(backfill).toMatchObject({ kind: "queued", item: { lane: "backfill", runId: "run-7" } });
    // Backfill rows have no default deadline; online requests get record timestamp + defaultTimeoutMs.
    if (backfill.kind === "queued") expect(backfill.item.deadlineMs).toBe(Number.POSITIVE_INFINITY);
    const online = intake.take(runningTask("req", "online"), record(1));
    expect(online.kind).toBe("queued");
    if (online.kind === "queued") {
      expect(online.item.lane).toBe("online");
      expect(online.item.runId).toBeUndefined();
      expect(online.item.deadlineMs).toBe(1000 + 30_000);
    }
  });
});
