import { describe, expect, it, vi } from "vitest";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import { PartitionTask } from "../../../src/processor/partition-task.js";
import { WriterSchemaGate } from "../../../src/processor/writer-schema-gate.js";
import { idleCommitter } from "../../support/idle-committer.js";

const committer = idleCommitter;

function runningTask(): PartitionTask {
  const t = new PartitionTask({ topic: "t", partition: 0 }, "cl");
  t.installCommitter(committer);
  t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0");
  return t;
}

const records = [{ offset: "0", value: Buffer.from([0, 0, 0, 0, 9, 0]), timestamp: "0" }];
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

function gateWith(failures: number) {
  let loaded = false;
  let attempts = 0;
  const resumed: PartitionTask[] = [];
  const warnings: object[] = [];
  const gate = new WriterSchemaGate({
    decoder: {
      schemaIdsToLoad: () => (loaded ? [] : [9]),
      loadSchemas: async () => {
        attempts++;
        if (attempts <= failures) throw new Error("schema registry http://r down");
        loaded = true;
      },
    },
    log: { ...quiet, warn: (obj) => void warnings.push(obj) },
    retryInitialMs: 10,
    retryMaxMs: 40,
    resume: (task) => void resumed.push(task),
  });
  return { gate, resumed, warnings, attempts: () => attempts };
}

describe("WriterSchemaGate", () => {
  it("lets records through when no schema is missing", async () => {
    const { gate, resumed } = gateWith(0);
    const t = runningTask();
    gate.holds(t, records);
    await vi.waitFor(() => expect(resumed).toHaveLength(1));
    expect(gate.holds(t, records)).toBe(false);
  });

  it("holds a partition until the schema is loaded, then resumes it once", async () => {
    const { gate, resumed } = gateWith(0);
    const t = runningTask();
    expect(gate.holds(t, records)).toBe(true);
    expect(gate.holds(t, records)).toBe(true); // a second fetch while waiting starts no second lookup
    await vi.waitFor(() => expect(resumed).toEqual([t]));
    expect(gate.holds(t, records)).toBe(false);
  });

  it("retries with growing waits while the registry cannot answer, never giving up", async () => {
    vi.useFakeTimers();
    try {
      const { gate, resumed, warnings, attempts } = gateWith(4);
      const t = runningTask();
      expect(gate.holds(t, records)).toBe(true);
      await vi.advanceTimersByTimeAsync(0);
      expect(attempts()).toBe(1);
      await vi.advanceTimersByTimeAsync(500);
      expect(attempts()).toBe(5);
      expect(resumed).toEqual([t]);
      const waits = warnings.map((w) => (w as { retryInMs: number }).retryInMs);
      expect(waits).toHaveLength(4);
      expect(waits[0]).toBeLessThanOrEqual(12);
      expect(waits[3]).toBeGreaterThanOrEqual(32); // capped at retryMaxMs 40 ± jitter
      expect(waits[3]).toBeLessThanOrEqual(48);
    } finally {
      vi.useRealTimers();
    }
  });

  it("does not resume a task reset meanwhile (its restore resumes it)", async () => {
    vi.useFakeTimers();
    try {
      const { gate, resumed, attempts } = gateWith(1);
      const t = runningTask();
      gate.holds(t, records);
      await vi.advanceTimersByTimeAsync(0);
      t.reset();
      t.installCommitter(committer);
      t.start(new Deduplicator({ ttlMs: 3_600_000, maxEntries: 1000 }), "0");
      await vi.advanceTimersByTimeAsync(100);
      // The retry still loaded the schema (cached for everyone) but resumed nothing of the old generation.
      expect(attempts()).toBe(2);
      expect(resumed).toEqual([]);
      expect(gate.holds(t, records)).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
