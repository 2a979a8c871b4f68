import { afterEach, describe, expect, it } from "vitest";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { encodeRequest } from "../../../src/contracts/request-codec.js";
import { ResultEncoder } from "../../../src/contracts/result-codec.js";
import { type TopicPartition, topicPartitionKey } from "../../../src/contracts/topic-partition.js";
import { CompletionBuilder } from "../../../src/delivery/completion-builder.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import { SluiceEvents } from "../../../src/events/sluice-events.js";
import { FallbackPolicy } from "../../../src/fallback/fallback-policy.js";
import { FallbackRules } from "../../../src/fallback/fallback-rules.js";
import type { ItemOutcome, ModelPort } from "../../../src/model/model-port.js";
import { PartitionRestorer } from "../../../src/processor/partition-restorer.js";
import type {
  CommitterHooks,
  FetchedRecord,
  RecordSource,
  RecordSourceHandlers,
  RestoreSources,
  TaskCommitter,
} from "../../../src/processor/processor-ports.js";
import { StreamProcessor, type StreamProcessorDeps } from "../../../src/processor/stream-processor.js";
import {
  type ProcessorSettings,
  settingsFromConfig,
} from "../../../src/processor/stream-processor-options.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { systemClock } from "../../../src/time/clock.js";

/**
 * The processor with every collaborator faked: a record source driven by the test, committers that
 * record what they are given, a model whose batches finish when the test says so, restore sources
 * that can fail. Real: PartitionTask, PartitionRestorer, LaneBatcher, CompletionBuilder, decoder.
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
  /** Lane of each call (`run`'s options). */
  lanes: string[] = [];
  /** Texts the model fails for (INFERENCE_FAILED). */
  failTexts = new Set<string>();
  /** Reported inference time of every batch, ms. */
  inferenceMs = 1;
  private gates: (() => void)[] = [];
  countTokens(text: string): number {
    return text.length;
  }
  async run(texts: readonly unknown[], options?: { lane?: string }) {
    this.calls.push([...texts]);
    this.lanes.push(options?.lane ?? "online");
    if (!this.auto) await new Promise<void>((resolve) => this.gates.push(resolve));
    const outcomes: ItemOutcome[] = texts.map((text) =>
      this.failTexts.has(String(text))
        ? { ok: false, code: "INFERENCE_FAILED", message: "fails (fake)" }
        : { ok: true, output: { embedding: [1, 0] }, tokens: 1, truncated: false },
    );
    return {
      outcomes,
      stats: { inferenceMs: this.inferenceMs, realTokens: texts.length, paddedTokens: texts.length },
    };
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

function harness(overrides: Partial<ProcessorSettings> = {}, extra: Partial<StreamProcessorDeps> = {}) {
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
    ...extra,
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

  async function started(
    overrides: Partial<ProcessorSettings> = {},
    extra: Partial<StreamProcessorDeps> = {},
    assignment: TopicPartition[] = [P0],
  ) {
    const h = harness(overrides, extra);
    open.push(h);
    await h.processor.start();
    h.source.assign(...assignment);
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

  it("a stop while a restore creates its producer: the producer is given back, no restore failure is told", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const created: FakeCommitter[] = [];
    let creating = false;
    const warnings: string[] = [];
    const sources = new FakeRestoreSources();
    const h = harness(
      {},
      {
        committers: async (_tp, _changelog, hooks) => {
          creating = true;
          await gate;
          const c = new FakeCommitter(hooks);
          created.push(c);
          return c;
        },
        restorer: new PartitionRestorer({
          sources,
          dedupTtlMs: 60_000,
          retryMs: 20,
          log: { info: () => {}, warn: (_fields, message) => warnings.push(message), error: () => {} },
        }),
      },
    );
    await h.processor.start();
    h.source.assign(P0);
    await until(() => creating, "the restore to create its producer");
    // The restore waits in its producer's initialisation when the stop begins (a rebalance's new
    // assignment meeting SIGTERM): the processor must not start the task without a producer.
    const closed = h.processor.close();
    release();
    await closed;
    expect(created).toHaveLength(1);
    expect(created[0]?.closedWith).toEqual({ commit: false });
    expect(warnings).toEqual([]);
    expect(sources.offsetReads).toBe(0);
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
    expect(committer.completions.get("1")?.remembered?.id).toBe("a");
    expect(committer.completions.get("0")?.remembered).toBeUndefined();
    expect(committer.completions.get("2")?.outcome).toBe("duplicate");
    expect(h.model.calls.flat()).toHaveLength(1);
  });

  // ── lanes and fallback (docs/lanes.md) ─────────────────────────────────────────────────────────

  const BF = "bf";
  const B0: TopicPartition = { topic: BF, partition: 0 };
  const lanes = { backfillTopics: [BF], maxBatchSize: 2, maxInFlightBatches: 1, maxWaitMs: 0 };
  const rules = () =>
    new FallbackPolicy({
      rules: FallbackRules.parse(
        "rules:\n  - keywords: [urgent]\n    label: block\n    scores: { block: 0.9, allow: 0.1 }\ndefault:\n  label: allow\n  scores: { allow: 1 }\n",
        "rules.yaml",
      ),
      maxOnlineQueue: 2,
    });
  const withFields = (offset: number, fields: { text?: string; deadlineMs?: number }): FetchedRecord => {
    const id = `id-${offset}`;
    const { value, headers } = encodeRequest({ id, text: `text ${offset}`, ...fields }, "json");
    return { offset: String(offset), key: Buffer.from(id), value, headers, timestamp: String(Date.now()) };
  };
  const decoded = (c: RecordCompletion | undefined) => {
    const value = c?.outputs[0]?.value;
    if (!Buffer.isBuffer(value)) throw new Error("no result published for this record");
    return JSON.parse(value.toString("utf8")) as Record<string, unknown>;
  };

  it("lanes: backfill fills the model while online items only wait for company; online leaves on its rule", async () => {
    const h = await started({ ...lanes, maxWaitMs: 40 }, {}, [P0, B0]);
    h.source.deliver(
      B0,
      Array.from({ length: 6 }, (_, i) => record(i, `b-${i}`)),
    );
    await until(() => h.model.waiting === 1, "the first backfill slice at the model");
    // One backfill slot: the other four rows stay in the lane, not in a runner ahead of online work.
    expect(h.model.lanes).toEqual(["backfill"]);
    h.source.deliver(P0, [record(0, "o-0")]);
    // The backfill slot frees while the online item only waits for company (maxWaitMs, its slot
    // free): backfill keeps the model busy, and the online batch leaves when its rule fires.
    h.model.release();
    await until(() => h.model.lanes.length === 3, "backfill again, then the online batch beside it");
    expect(h.model.lanes).toEqual(["backfill", "backfill", "online"]);
    expect(h.model.calls[2]).toEqual(["text 0"]);
    h.model.auto = true;
    h.model.release();
    const [online, backfill] = h.committers as FakeCommitter[];
    await until(() => (backfill?.completions.size ?? 0) === 6 && online?.completions.size === 1, "all done");
  });

  it("lanes: an online batch does not wait for a busy backfill slot, and runs in the online lane", async () => {
    const h = await started(lanes, {}, [P0, B0]);
    h.source.deliver(B0, [record(0, "b-0"), record(1, "b-1"), record(2, "b-2")]);
    await until(() => h.model.waiting === 1, "a backfill slice at the model");
    h.source.deliver(P0, [record(0, "o-0")]);
    await until(() => h.model.waiting === 2, "the online batch at the model beside it");
    expect(h.model.lanes).toEqual(["backfill", "online"]);
  });

  it("lanes: online items leave by earliest deadline", async () => {
    const h = await started({ ...lanes, maxBatchSize: 1 });
    h.source.deliver(P0, [withFields(0, {})]); // occupies the model (one slot)
    await until(() => h.model.waiting === 1, "the first batch");
    const now = Date.now();
    h.source.deliver(P0, [
      withFields(1, { deadlineMs: now + 60_000 }),
      withFields(2, { deadlineMs: now + 20_000 }),
      withFields(3, { deadlineMs: now + 40_000 }),
    ]);
    h.model.auto = true;
    h.model.release();
    await until(() => h.model.calls.length === 4, "all batches");
    expect(h.model.calls.slice(1)).toEqual([["text 2"], ["text 3"], ["text 1"]]);
  });

  it("backpressure pauses backfill partitions at half the bound, online ones at the bound", async () => {
    const h = await started({ ...lanes, maxQueuedRecords: 8 }, {}, [P0, B0]);
    const paused: unknown[] = [];
    h.processor["deps"].events.on("consumer.paused", (e) => paused.push(e.lanes));
    h.source.deliver(
      B0,
      Array.from({ length: 4 }, (_, i) => record(i, `b-${i}`)),
    );
    expect(h.source.paused.has(`${BF}/0`)).toBe(true);
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(false);
    h.source.deliver(
      P0,
      Array.from({ length: 4 }, (_, i) => record(i, `o-${i}`)),
    );
    expect(h.source.paused.has(`${TOPIC}/0`)).toBe(true);
    expect(paused).toEqual([["backfill"], ["online"]]);
    h.model.auto = true;
    h.model.release();
    const all = () => (h.committers as FakeCommitter[]).reduce((n, c) => n + c.completions.size, 0);
    await until(() => all() === 8, "all completions");
    for (const c of h.committers as FakeCommitter[]) c.commitCompleted();
    expect(h.source.paused.size).toBe(0);
  });

  it("fallback: overload, model_error and a missed deadline give status fallback with the rule's output", async () => {
    const h = await started({ ...lanes, maxBatchSize: 4, maxInFlightBatches: 1 }, { fallback: rules() });
    h.model.failTexts.add("urgent crash");
    const soon = Date.now() + 30;
    h.source.deliver(P0, [withFields(0, { text: "urgent crash" }), withFields(1, { deadlineMs: soon })]);
    await until(() => h.model.waiting === 1, "the first batch");
    // Two online requests are held (maxOnlineQueue 2): the next ones fall back at once.
    h.source.deliver(P0, [withFields(2, { text: "an urgent one" }), withFields(3, {})]);
    const committer = h.committers[0] as FakeCommitter;
    expect(decoded(committer.completions.get("2"))).toMatchObject({
      status: "fallback",
      fallbackReason: "overload",
      output: { label: "block", scores: { block: 0.9, allow: 0.1 } },
    });
    expect(committer.completions.get("2")?.fallbackReason).toBe("overload");
    expect(decoded(committer.completions.get("3"))).toMatchObject({
      status: "fallback",
      fallbackReason: "overload",
      output: { label: "allow" },
    });
    // An already-late request says deadline, even with the queue full.
    h.source.deliver(P0, [withFields(4, { deadlineMs: Date.now() - 1 })]);
    expect(decoded(committer.completions.get("4"))).toMatchObject({
      status: "fallback",
      fallbackReason: "deadline",
    });
    expect(h.model.calls[0]).toEqual(["urgent crash"]);
    await new Promise((r) => setTimeout(r, 40)); // record 1's deadline passes while it waits for the slot
    h.model.auto = true;
    h.model.release();
    await until(() => committer.completions.size === 5, "the model's answer");
    // Record 1 was late at dispatch: deadline, answered without the model.
    expect(decoded(committer.completions.get("1"))).toMatchObject({
      status: "fallback",
      fallbackReason: "deadline",
    });
    expect(h.model.calls).toHaveLength(1);
    expect(decoded(committer.completions.get("0"))).toMatchObject({
      status: "fallback",
      fallbackReason: "model_error",
      output: { label: "block" },
    });
  });

  it("fallback: a request predicted to miss its deadline falls back at intake, before it expires", async () => {
    const h = await started({ ...lanes, maxBatchSize: 1 }, { fallback: rules() });
    h.model.auto = true;
    h.model.inferenceMs = 5_000; // measured: 5 s per item
    h.source.deliver(P0, [withFields(0, {})]);
    const committer = h.committers[0] as FakeCommitter;
    await until(() => committer.completions.size === 1, "the warm-up result");
    const deadlineMs = Date.now() + 1_000;
    h.source.deliver(P0, [withFields(1, { deadlineMs })]);
    const result = decoded(committer.completions.get("1"));
    expect(result).toMatchObject({ status: "fallback", fallbackReason: "deadline" });
    expect((result["timing"] as { completedAt: number }).completedAt).toBeLessThan(deadlineMs);
    expect(h.model.calls).toHaveLength(1); // never reached the model
  });

  it("without rules a late request expires and a model failure is a dead letter, as before", async () => {
    const h = await started({ ...lanes, maxBatchSize: 4 });
    h.model.auto = true;
    h.model.failTexts.add("urgent crash");
    h.source.deliver(P0, [
      withFields(0, { text: "urgent crash" }),
      withFields(1, { deadlineMs: Date.now() - 1 }),
    ]);
    const committer = h.committers[0] as FakeCommitter;
    await until(() => committer.completions.size === 2, "both");
    expect(committer.completions.get("0")?.outcome).toBe("dead_letter");
    expect(decoded(committer.completions.get("1"))).toMatchObject({ status: "expired" });
  });

  it("backfill rows never fall back, even with rules", async () => {
    const h = await started({ ...lanes, maxBatchSize: 4 }, { fallback: rules() }, [P0, B0]);
    h.model.auto = true;
    h.model.failTexts.add("urgent crash");
    h.source.deliver(B0, [withFields(0, { text: "urgent crash" }), withFields(1, {})]);
    const backfill = h.committers.find((_, i) => i === 1) as FakeCommitter;
    await until(() => backfill.completions.size === 2, "both rows");
    expect(backfill.completions.get("0")?.outcome).toBe("dead_letter");
    expect(decoded(backfill.completions.get("1"))).toMatchObject({ status: "ok" });
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
