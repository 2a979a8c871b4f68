import { afterEach, describe, expect, it } from "vitest";
import { systemClock } from "../../../src/batching/micro-batcher.js";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { encodeRequest } from "../../../src/contracts/request-codec.js";
import { ResultEncoder } from "../../../src/contracts/result-codec.js";
import { type TopicPartition, topicPartitionKey } from "../../../src/contracts/topic-partition.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import type { ItemOutcome, ModelPort } from "../../../src/model/model-port.js";
import { SluiceEvents } from "../../../src/observability/sluice-events.js";
import { PartitionRestorer } from "../../../src/processor/partition-restorer.js";
import type {
  CommitterHooks,
  FetchedRecord,
  RecordSource,
  RecordSourceHandlers,
  RestoreSources,
  TaskCommitter,
} from "../../../src/processor/processor-ports.js";
import { StreamProcessor } from "../../../src/processor/stream-processor.js";
import {
  type ProcessorSettings,
  settingsFromConfig,
} from "../../../src/processor/stream-processor-options.js";
import { SluiceError } from "../../../src/sluice-error.js";

/**
 * The processor with every collaborator faked: a record source driven by the test, committers that
 * record what they are given, a model whose batches finish when the test says so, restore sources
 * that can fail. Real: PartitionTask, PartitionRestorer, MicroBatcher, CompletionBuilder, decoder.
 */

const TOPIC = "req";
const P0: TopicPartition = { topic: TOPIC, partition: 0 };

class FakeSource implements RecordSource {
  handlers: RecordSourceHandlers | undefined;
  paused = new Set<string>();
  seeks: { tp: TopicPartition; offset: string }[] = [];
  pauseCalls = 0;
  resumeCalls = 0;
  closed = false;
  async start(handlers: RecordSourceHandlers): Promise<void> {
    this.handlers = handlers;
  }
  pause(tps: readonly TopicPartition[]): void {
    this.pauseCalls++;
    for (const tp of tps) this.paused.add(`${tp.topic}/${tp.partition}`);
  }
  resume(tps: readonly TopicPartition[]): void {
    this.resumeCalls++;
    for (const tp of tps) this.paused.delete(`${tp.topic}/${tp.partition}`);
  }
  seek(tp: TopicPartition, offset: string): void {
    this.seeks.push({ tp, offset });
  }
  async close(): Promise<void> {
    this.closed = true;
  }
  assign(...tps: TopicPartition[]): void {
    this.handlers?.onAssigned(tps);
  }
  deliver(tp: TopicPartition, records: FetchedRecord[]) {
    return this.handlers?.onRecords(tp.topic, tp.partition, records, records[0]?.offset ?? "0");
  }
}

class FakeCommitter implements TaskCommitter {
  tracked: string[] = [];
  completions = new Map<string, RecordCompletion>();
  committedCount = 0;
  closedWith: { commit: boolean } | undefined;
  commitSoonCalls = 0;
  constructor(readonly hooks: CommitterHooks) {}
  get pendingRecords(): number {
    return this.tracked.length - this.committedCount;
  }
  track(offset: string): void {
    this.tracked.push(offset);
  }
  complete(offset: string, completion: RecordCompletion): void {
    this.completions.set(offset, completion);
  }
  commitSoon(): void {
    this.commitSoonCalls++;
  }
  async flush(): Promise<void> {}
  async close(options: { commit: boolean }): Promise<void> {
    this.closedWith ??= options;
  }
  /** Commits everything completed so far (as a transaction would). */
  commitCompleted(): void {
    this.committedCount = this.completions.size;
    this.hooks.onCommitted();
  }
}

/** A model whose batches finish only when `release()` is called (or at once when `auto`). */
class GatedModel implements ModelPort {
  readonly identity = { name: "fake", version: "1" };
  readonly task = "embedding" as const;
  auto = false;
  calls: unknown[][] = [];
  private gates: (() => void)[] = [];
  countTokens(text: string): number {
    return text.length;
  }
  async run(texts: readonly unknown[]) {
    this.calls.push([...texts]);
    if (!this.auto) await new Promise<void>((resolve) => this.gates.push(resolve));
    const outcomes: ItemOutcome[] = texts.map(() => ({
      ok: true,
      output: { embedding: [1, 0] },
      tokens: 1,
      truncated: false,
    }));
    return { outcomes, stats: { inferenceMs: 1, realTokens: texts.length, paddedTokens: texts.length } };
  }
  get waiting(): number {
    return this.gates.length;
  }
  release(): void {
    for (const g of this.gates.splice(0)) g();
  }
  async close(): Promise<void> {}
}

class FakeRestoreSources implements RestoreSources {
  failuresLeft = 0;
  offsetReads = 0;
  closed = false;
  async committedOffsets(tps: readonly TopicPartition[]): Promise<Map<string, string>> {
    this.offsetReads++;
    if (this.failuresLeft > 0) {
      this.failuresLeft--;
      throw new Error("offset fetch failed (fake)");
    }
    return new Map(tps.map((tp) => [topicPartitionKey(tp.topic, tp.partition), "0"]));
  }
  async readChangelog() {
    return new Map();
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const record = (offset: number, id = `id-${offset}`): FetchedRecord => {
  const { value, headers } = encodeRequest({ id, text: `text ${offset}` }, "json");
  return { offset: String(offset), key: Buffer.from(id), value, headers, timestamp: String(Date.now()) };
};

async function until(cond: () => boolean, what: string, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

function harness(overrides: Partial<ProcessorSettings> = {}) {
  const settings: ProcessorSettings = {
    ...settingsFromConfig(defaultConfig()),
    requestTopics: [TOPIC],
    resultsTopic: "res",
    deadLetterTopic: "dlq",
    maxBatchSize: 4,
    maxWaitMs: 0,
    restoreRetryMs: 20,
    ...overrides,
  };
  const source = new FakeSource();
  const model = new GatedModel();
  const sources = new FakeRestoreSources();
  const committers: FakeCommitter[] = [];
  const events = new SluiceEvents();
  const seen: string[] = [];
  for (const name of ["partitions.revoked", "consumer.paused", "consumer.resumed"] as const)
    events.on(name, () => seen.push(name));
  const encoder = new ResultEncoder({ codec: "json" });
  const log = { info: () => {}, warn: () => {}, error: () => {} };
  const processor = new StreamProcessor(settings, {
    source,
    restorer: new PartitionRestorer({
      sources,
      dedupTtlMs: settings.dedupTtlMs,
      retryMs: settings.restoreRetryMs,
      log,
    }),
    committers: async (_tp, _changelog, hooks) => {
      const c = new FakeCommitter(hooks);
      committers.push(c);
      return c;
    },
    model,
    completions: new CompletionBuilder({
      resultsTopic: "res",
      deadLetterTopic: "dlq",
      encodeResult: (r) => encoder.encode(r),
      maxDeadLetterBytes: 100_000,
    }),
    events,
    log,
    clock: systemClock,
    changelogTopicOf: (t) => `dedup.g.${t}`,
  });
  return { processor, source, model, sources, committers, seen };
}

describe("StreamProcessor (fake source, committers and model)", () => {
  const open: ReturnType<typeof harness>[] = [];
  afterEach(async () => {
    for (const h of open) {
      h.model.auto = true; // a failed test must not leave close() waiting for a gated batch
      h.model.release();
    }
    await Promise.all(open.splice(0).map((h) => h.processor.close()));
  });

  async function started(overrides: Partial<ProcessorSettings> = {}) {
    const h = harness(overrides);
    open.push(h);
    await h.processor.start();
    h.source.assign(P0);
    await until(() => h.processor.readiness().ready, "the partition to be restored");
    return h;
  }

  it("restores an assigned partition: committer first, then seek to the committed offset, then resume", async () => {
    const h = await started();
    expect(h.committers).toHaveLength(1);
    expect(h.source.seeks).toEqual([{ tp: P0, offset: "0" }]);
    expect(h.source.paused.size).toBe(0);
    expect(h.processor.assignment()).toEqual([{ topic: TOPIC, partition: 0, phase: "ready" }]);
  });

  it("revocation while a batch is inferring: the batch's results are dropped, the committer commits what was done and closes", async () => {
    const h = await started();
    expect(h.source.deliver(P0, [record(0), record(1), record(2)])).toBe("accepted");
    await until(() => h.model.waiting >= 1, "the batch to reach the model");
    const committer = h.committers[0] as FakeCommitter;
    h.source.assign(); // the group takes the partition away
    expect(h.seen).toContain("partitions.revoked");
    expect(committer.closedWith).toEqual({ commit: true });
    h.model.auto = true;
    h.model.release();
    await new Promise((r) => setTimeout(r, 20));
    expect(committer.completions.size).toBe(0); // void work never reaches any committer
    expect(h.processor.assignment()).toEqual([]);
    expect(h.source.deliver(P0, [record(3)])).toBe("refused");
  });

  it("fencing in the middle of a transaction: in-flight work is void, the partition is reclaimed on the next assignment", async () => {
    const h = await started({ heartbeatIntervalMs: 50, sessionTimeoutMs: 10_000 });
    h.source.deliver(P0, [record(0), record(1)]);
    await until(() => h.model.waiting >= 1, "the batch to reach the model");
    const first = h.committers[0] as FakeCommitter;
    first.hooks.onFailure(new SluiceError("PRODUCER_FENCED", "fenced (fake)"));
    expect(first.closedWith).toEqual({ commit: false });
    expect(h.processor.readiness().ready).toBe(false);
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(true);
    h.model.auto = true;
    h.model.release();
    await new Promise((r) => setTimeout(r, 20));
    expect(first.completions.size).toBe(0);
    // The group still lists us: reclaim at once (a fresh committer fences whoever fenced us).
    h.source.assign(P0);
    await until(() => h.processor.readiness().ready, "the reclaim");
    expect(h.committers).toHaveLength(2);
    const second = h.committers[1] as FakeCommitter;
    // kafkajs re-fetches from the committed offset: both records are redone on the new committer.
    expect(h.source.deliver(P0, [record(0), record(1)])).toBe("accepted");
    await until(() => second.completions.size === 2, "the redone records");
    expect([...second.completions.values()].map((c) => c.outcome)).toEqual(["result", "result"]);
    expect(first.completions.size).toBe(0);
  });

  it("a late failure of a replaced committer does not reset the partition again", async () => {
    const h = await started();
    const first = h.committers[0] as FakeCommitter;
    first.hooks.onFailure(new SluiceError("TRANSACTION_FAILED", "broker hiccup (fake)"));
    await until(() => h.processor.readiness().ready && h.committers.length === 2, "the reclaim");
    first.hooks.onFailure(new SluiceError("TRANSACTION_FAILED", "late (fake)"));
    await new Promise((r) => setTimeout(r, 30));
    expect(h.committers).toHaveLength(2);
    expect(h.processor.readiness().ready).toBe(true);
  });

  it("backpressure: pauses at maxQueuedRecords (completed-but-uncommitted records count) and resumes at half", async () => {
    const h = await started({ maxQueuedRecords: 8, maxBatchSize: 4 });
    const committer = h.committers[0] as FakeCommitter;
    expect(
      h.source.deliver(
        P0,
        Array.from({ length: 8 }, (_, i) => record(i)),
      ),
    ).toBe("accepted");
    expect(h.seen).toContain("consumer.paused");
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(true);
    expect(committer.commitSoonCalls).toBeGreaterThan(0);
    h.model.auto = true;
    h.model.release();
    await until(() => committer.completions.size === 8, "all 8 completions");
    // Completed but not committed: still paused.
    expect(h.seen).not.toContain("consumer.resumed");
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(true);
    committer.commitCompleted();
    expect(h.seen).toContain("consumer.resumed");
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(false);
  });

  it("shutdown with batches in flight waits for them, hands their completions over, commits and closes", async () => {
    const h = await started();
    h.source.deliver(P0, [record(0), record(1), record(2), record(3), record(4)]);
    await until(() => h.model.waiting >= 1, "a batch at the model");
    const closed = h.processor.close();
    let done = false;
    void closed.then(() => {
      done = true;
    });
    await new Promise((r) => setTimeout(r, 30));
    expect(done).toBe(false); // still waiting for the model
    h.model.auto = true;
    h.model.release();
    await closed;
    const committer = h.committers[0] as FakeCommitter;
    // maxWaitMs 0: one batch per record; the two at the model (maxInFlightBatches 2) finish, the three
    // not started are left to the next owner (bounded shutdown, docs/configuration.md `shutdown`).
    expect(committer.completions.size).toBe(2);
    expect(committer.closedWith).toEqual({ commit: true });
    expect(h.source.closed).toBe(true);
    expect(h.sources.closed).toBe(true);
    expect(h.processor.readiness()).toEqual({ ready: false, reason: "stopping" });
  });

  it("a restore that fails gives its producer back and is retried until it succeeds", async () => {
    const h = harness();
    open.push(h);
    h.sources.failuresLeft = 2;
    await h.processor.start();
    h.source.assign(P0);
    await until(() => h.committers.length >= 1, "the first committer");
    expect(h.processor.readiness().ready).toBe(false);
    await until(() => h.processor.readiness().ready, "the retried restore");
    expect(h.sources.offsetReads).toBe(3);
    expect(h.committers).toHaveLength(3);
    expect(h.committers.slice(0, 2).map((c) => c.closedWith)).toEqual([{ commit: false }, { commit: false }]);
    expect((h.committers[2] as FakeCommitter).closedWith).toBeUndefined();
  });

  it("decode failures and duplicates complete without the model: one dead letter, one counted duplicate", async () => {
    const h = await started();
    h.model.auto = true;
    const bad: FetchedRecord = {
      offset: "0",
      key: null,
      value: Buffer.from("{nope"),
      timestamp: String(Date.now()),
    };
    h.source.deliver(P0, [bad, record(1, "a"), record(2, "a")]);
    const committer = h.committers[0] as FakeCommitter;
    await until(() => committer.completions.size === 3, "three completions");
    expect(committer.completions.get("0")?.outcome).toBe("dead_letter");
    expect(committer.completions.get("0")?.outputs[0]?.topic).toBe("dlq");
    expect(committer.completions.get("1")?.outcome).toBe("result");
    expect(committer.completions.get("1")?.changelog[0]?.topic).toBe(`dedup.g.${TOPIC}`);
    expect(committer.completions.get("2")?.outcome).toBe("duplicate");
    expect(h.model.calls.flat()).toHaveLength(1);
  });
});

describe("StreamProcessor bounded shutdown (close({ timeoutMs }))", () => {
  it("finishes the batch at the model, leaves batches not started to the next owner, commits", async () => {
    const h = harness({ maxBatchSize: 2, maxWaitMs: 1000, maxInFlightBatches: 1 });
    await h.processor.start();
    h.source.assign(P0);
    await until(() => h.processor.readiness().ready, "the partition to be restored");
    // Three batches of two: the first is at the model, two wait behind it (one in flight at a time).
    h.source.deliver(
      P0,
      [0, 1, 2, 3, 4, 5].map((i) => record(i)),
    );
    await until(() => h.model.waiting >= 1, "the first batch at the model");
    const closed = h.processor.close({ timeoutMs: 10_000 });
    h.model.auto = true;
    h.model.release();
    await closed;
    const committer = h.committers[0] as FakeCommitter;
    expect([...committer.completions.keys()].sort()).toEqual(["0", "1"]);
    expect(h.model.calls.flat()).toHaveLength(2); // the waiting batches never reached the model
    expect(committer.closedWith).toEqual({ commit: true });
    expect(h.source.closed).toBe(true);
  });

  it("a batch still inferring when the budget ends is not waited for and not committed", async () => {
    const h = harness();
    await h.processor.start();
    h.source.assign(P0);
    await until(() => h.processor.readiness().ready, "the partition to be restored");
    h.source.deliver(P0, [record(0), record(1)]);
    await until(() => h.model.waiting >= 1, "a batch at the model");
    const started = Date.now();
    await h.processor.close({ timeoutMs: 300 });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(200); // waited up to the budget less its reserve (75 ms)
    expect(took).toBeLessThan(2000);
    const committer = h.committers[0] as FakeCommitter;
    expect(committer.closedWith).toEqual({ commit: true }); // commits the (empty) completed prefix
    h.model.auto = true;
    h.model.release(); // the late batch finishes after the close: its results are void
    await new Promise((r) => setTimeout(r, 20));
    expect(committer.completions.size).toBe(0);
    expect(h.source.closed).toBe(true);
  });
});
