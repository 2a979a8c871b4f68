import { SpanStatusCode } from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { OUTPUT_TOO_LARGE } from "../../../src/delivery/completion-builder.js";
import { DedupChangelog } from "../../../src/delivery/dedup-changelog.js";
import { decodeDedupSegment, isDedupSegmentKey } from "../../../src/delivery/dedup-segment.js";
import { Deduplicator } from "../../../src/delivery/deduplicator.js";
import type { OutboundMessage, RecordCompletion } from "../../../src/delivery/outbound-message.js";
import {
  NOT_COMMITTED,
  PartitionCommitter,
  type PartitionCommitterOptions,
  type PublishUnit,
  type ResultPublisher,
} from "../../../src/delivery/partition-committer.js";
import { SendBound } from "../../../src/delivery/size-refusal.js";
import { OFFSET_CHECKPOINT_KEY } from "../../../src/delivery/transaction-records.js";
import { type SluiceEventMap, SluiceEvents } from "../../../src/events/sluice-events.js";
import { partitionSubject, tooLarge as refusal } from "../../../src/kafka/write/produce-failure.js";
import { chunks } from "../../../src/kafka/write/record-collector.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { FakeClock } from "../../support/fake-clock.js";
import { inMemoryTracing } from "../tracing/in-memory-tracing.js";

/** A publisher that records units and refuses those its rule says are too large (or fails). */
class FakePublisher implements ResultPublisher {
  readonly units: PublishUnit[] = [];
  readonly refused: PublishUnit[] = [];
  closed = false;
  constructor(private readonly rule: (unit: PublishUnit) => SluiceError | undefined = () => undefined) {}
  async publish(unit: PublishUnit): Promise<void> {
    const error = this.rule(unit);
    if (error) {
      this.refused.push(unit);
      throw error;
    }
    this.units.push(unit);
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const tooLarge = () => new SluiceError("PUBLISH_TOO_LARGE", "refused (fake)", { retriable: true });

/**
 * A publisher that sends like the real ones (src/delivery/size-refusal.ts): outputs then bookkeeping
 * in sends bounded by a learned `SendBound`, to a "broker" that refuses the sends `refuses` says are
 * too large; a refusal halves the bound (several records) and names the send (`records`, `recordIndex`).
 */
class SendingPublisher implements ResultPublisher {
  readonly units: PublishUnit[] = [];
  /** The sends of the committed units. */
  readonly sends: OutboundMessage[][] = [];
  refusals = 0;
  readonly bound: SendBound;
  constructor(
    private readonly refuses: (send: readonly OutboundMessage[]) => boolean,
    bound = 524_288,
  ) {
    this.bound = new SendBound(bound);
  }
  async publish(unit: PublishUnit): Promise<void> {
    const sends: OutboundMessage[][] = [];
    let from = 0;
    for (const send of chunks([...unit.outputs, ...unit.bookkeeping], this.bound.bytes)) {
      if (this.refuses(send)) {
        this.refusals++;
        this.bound.refused(send.length);
        const error = new Error("The request included a message larger than the max message size (fake)");
        throw refusal(error, partitionSubject("requests", 0), { records: send.length, recordIndex: from });
      }
      sends.push(send);
      from += send.length;
    }
    this.units.push(unit);
    this.sends.push(...sends);
  }
  async close(): Promise<void> {}
}

/** A "broker" rule: refuses a send holding a value above `bytes`. */
const holdsAbove =
  (bytes: number) =>
  (send: readonly OutboundMessage[]): boolean =>
    send.some((m) => ((m.value as Buffer | string | null)?.length ?? 0) > bytes);

function completion(id: string, valueBytes = 10): RecordCompletion {
  return {
    outputs: [{ topic: "results", key: id, value: Buffer.alloc(valueBytes) }],
    remembered: { id, expiresAtMs: 1 },
    outcome: "result",
    status: "ok",
    recordTimestampMs: 500,
  };
}

function setup<P extends ResultPublisher = FakePublisher>(
  options: Partial<PartitionCommitterOptions> = {},
  publisher: P = new FakePublisher() as ResultPublisher as P,
) {
  const clock = new FakeClock();
  const events = new SluiceEvents();
  const seen: {
    transactions: SluiceEventMap["transaction.finished"][];
    outcomes: SluiceEventMap["record.outcome"][];
  } = { transactions: [], outcomes: [] };
  events.on("transaction.finished", (e) => seen.transactions.push(e));
  events.on("record.outcome", (e) => seen.outcomes.push(e));
  const failures: SluiceError[] = [];
  let committed = 0;
  const dedup = new Deduplicator({ ttlMs: 60_000, maxEntries: 1000 });
  const committer = new PartitionCommitter(
    {
      topic: "requests",
      partition: 0,
      events,
      dedupChangelog: new DedupChangelog({
        topic: "changelog",
        partition: 0,
        dedup: () => dedup,
        now: () => clock.now(),
      }),
      commitIntervalMs: 100,
      maxTransactionRecords: 500,
      maxTransactionBytes: 524_288,
      onCommitted: () => committed++,
      onFailure: (e) => failures.push(e),
      ...options,
    },
    publisher,
    clock,
  );
  return { clock, committer, publisher, seen, failures, committed: () => committed };
}

/** The request ids a unit's dedup segments hold, in order. */
const segmentIds = (messages: readonly OutboundMessage[]): string[] =>
  messages.flatMap((m) =>
    Buffer.isBuffer(m.key) && isDedupSegmentKey(m.key)
      ? (decodeDedupSegment(m.value as string) ?? []).map((e) => e.id)
      : [],
  );

/** Lets the committer's promise chains run (the fake publisher resolves at once). */
const settle = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

const keysOf = (unit: PublishUnit) => unit.outputs.map((m) => String(m.key));

describe("PartitionCommitter: cadence", () => {
  it("commits the completed prefix once per commit interval, with offset + 1 and one event per record", async () => {
    const h = setup();
    for (const o of ["10", "11", "12"]) h.committer.track(o);
    h.committer.complete("10", completion("a"));
    h.committer.complete("11", completion("b"));
    h.clock.advance(99);
    await settle();
    expect(h.publisher.units).toHaveLength(0);
    h.clock.advance(1);
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a", "b"]]);
    expect(h.publisher.units[0]?.nextOffset).toBe("12");
    expect(h.committer.pendingRecords).toBe(1);
    expect(h.seen.outcomes.map((o) => o.outcome)).toEqual(["result", "result"]);
    expect(h.seen.outcomes[0]?.endToEndMs).toBe(h.clock.now() - 500);
    expect(h.seen.transactions).toMatchObject([{ outcome: "committed", records: 2, nextOffset: "12" }]);
    expect(h.committed()).toBe(1);
  });

  it("holds a completed record behind an unfinished one (only the contiguous prefix commits)", async () => {
    const h = setup();
    h.committer.track("1");
    h.committer.track("2");
    h.committer.complete("2", completion("b"));
    h.clock.advance(300);
    await settle();
    expect(h.publisher.units).toHaveLength(0);
    h.committer.complete("1", completion("a"));
    h.clock.advance(100);
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a", "b"]]);
    expect(h.publisher.units[0]?.nextOffset).toBe("3");
  });

  it("commits every completion at once with commitIntervalMs 0, and sets no timer", async () => {
    const h = setup({ commitIntervalMs: 0 });
    expect(h.clock.setCalls).toBe(0);
    h.committer.track("0");
    h.committer.complete("0", completion("a"));
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a"]]);
  });

  it("starts a commit before the tick when a transaction's worth is waiting", async () => {
    const h = setup({ maxTransactionRecords: 3 });
    for (let i = 0; i < 3; i++) h.committer.track(String(i));
    for (let i = 0; i < 3; i++) h.committer.complete(String(i), completion(`r${i}`));
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["r0", "r1", "r2"]]);
  });

  it("writes the offset checkpoint with the changelog entries, after the outputs", async () => {
    const h = setup({ offsetCheckpoint: { topic: "changelog", partition: 0 } });
    h.committer.track("7");
    h.committer.complete("7", completion("a"));
    await h.committer.flush();
    const unit = h.publisher.units[0] as PublishUnit;
    expect(unit.outputs.map((m) => m.topic)).toEqual(["results"]);
    expect(unit.bookkeeping).toHaveLength(2);
    expect(segmentIds(unit.bookkeeping)).toEqual(["a"]);
    expect(unit.bookkeeping[1]?.key).toEqual(OFFSET_CHECKPOINT_KEY);
    expect(unit.bookkeeping[1]?.value).toBe("8");
  });

  it("stops the cadence on close and commits the prefix only on a clean close", async () => {
    const h = setup();
    h.committer.track("0");
    h.committer.complete("0", completion("a"));
    await h.committer.close({ commit: false });
    h.clock.advance(1000);
    await settle();
    expect(h.publisher.units).toHaveLength(0);
    expect(h.publisher.closed).toBe(true);
    expect(h.clock.timers.size).toBe(0);

    const clean = setup();
    clean.committer.track("0");
    clean.committer.complete("0", completion("a"));
    await clean.committer.close({ commit: true });
    expect(clean.publisher.units.map(keysOf)).toEqual([["a"]]);
  });
});

describe("PartitionCommitter: slicing", () => {
  it("cuts transactions at maxTransactionRecords and maxTransactionBytes, at record boundaries, in order", async () => {
    const h = setup({ maxTransactionRecords: 4, maxTransactionBytes: 1_000 });
    for (let i = 0; i < 10; i++) h.committer.track(String(i));
    // 300-byte values: three records fit 1,000 estimated bytes, a fourth would not.
    for (let i = 0; i < 10; i++) h.committer.complete(String(i), completion(`r${i}`, 300));
    await h.committer.flush();
    const units = h.publisher.units;
    expect(units.flatMap(keysOf)).toEqual(Array.from({ length: 10 }, (_, i) => `r${i}`));
    for (const u of units) expect(u.outputs.length).toBeLessThanOrEqual(3);
    expect(units.map((u) => u.nextOffset)).toEqual(
      units.map((u) => String(Number(u.outputs.at(-1)?.key?.toString().slice(1)) + 1)),
    );
  });

  it("sends a record bigger than maxTransactionBytes alone", async () => {
    const h = setup({ maxTransactionBytes: 1_000 });
    for (let i = 0; i < 3; i++) h.committer.track(String(i));
    h.committer.complete("0", completion("small-0"));
    h.committer.complete("1", completion("big", 5_000));
    h.committer.complete("2", completion("small-2"));
    await h.committer.flush();
    expect(h.publisher.units.map(keysOf)).toEqual([["small-0"], ["big"], ["small-2"]]);
  });
});

describe("PartitionCommitter: size refusals and the too-large dead letter", () => {
  it("publishes a unit refused in a send of several records again, whole, in one transaction with its offset", async () => {
    // The "broker" takes at most two records per send; the publisher learns it by halving its bound.
    const publisher = new SendingPublisher((send) => send.length > 2);
    const h = setup({}, publisher);
    for (let i = 0; i < 7; i++) h.committer.track(String(i));
    for (let i = 0; i < 7; i++) h.committer.complete(String(i), completion(`r${i}`));
    await h.committer.flush();
    expect(h.failures).toEqual([]);
    expect(publisher.units.map(keysOf)).toEqual([Array.from({ length: 7 }, (_, i) => `r${i}`)]);
    expect(publisher.units[0]?.nextOffset).toBe("7");
    for (const send of publisher.sends) expect(send.length).toBeLessThanOrEqual(2);
    expect(publisher.refusals).toBeGreaterThan(0);
    const aborted = h.seen.transactions.filter((t) => t.outcome === "aborted");
    expect(aborted.length).toBe(publisher.refusals);
    expect(h.seen.transactions.at(-1)).toMatchObject({ outcome: "committed", records: 7, nextOffset: "7" });
    expect(h.seen.outcomes).toHaveLength(7);
  });

  it("replaces the outputs of a record refused alone by a payload-less dead letter, and its neighbours publish", async () => {
    const publisher = new SendingPublisher(holdsAbove(1_000));
    const h = setup({ deadLetterTopic: "dlq" }, publisher);
    for (let i = 0; i < 4; i++) h.committer.track(String(i));
    h.committer.complete("0", completion("a"));
    h.committer.complete("1", completion("b"));
    h.committer.complete("2", completion("huge", 50_000));
    h.committer.complete("3", completion("d"));
    await h.committer.flush();
    expect(h.failures).toEqual([]);
    // One transaction: the dead letter replaces the refused outputs in place, with the same offset.
    expect(publisher.units).toHaveLength(1);
    const outputs = publisher.units.flatMap((u) => u.outputs);
    expect(outputs.map((m) => m.topic)).toEqual(["results", "results", "dlq", "results"]);
    const dl = outputs[2];
    expect(dl?.key ?? null).toBeNull();
    expect(dl?.value ?? null).toBeNull();
    expect(String(dl?.headers?.["sluice.error.code"])).toBe(OUTPUT_TOO_LARGE);
    // Its id still goes to the changelog: the request stays deduplicated.
    expect(segmentIds(publisher.units.flatMap((u) => u.bookkeeping))).toEqual(["a", "b", "huge", "d"]);
    expect(h.seen.outcomes.map((o) => o.outcome)).toEqual(["result", "result", "dead_letter", "result"]);
    expect(publisher.units.at(-1)?.nextOffset).toBe("4");
  });

  it("maps a refused output to the completion that holds it: the 2nd completion's dead letter, the rest in the same transaction", async () => {
    const publisher = new SendingPublisher(holdsAbove(1_000));
    const h = setup({ deadLetterTopic: "dlq" }, publisher);
    const outputs = (id: string, sizes: number[]) =>
      sizes.map((bytes, i) => ({ topic: "results", key: `${id}-${i}`, value: Buffer.alloc(bytes) }));
    for (const o of ["10", "11", "12"]) h.committer.track(o);
    h.committer.complete("10", { ...completion("x"), outputs: outputs("x", [10, 10]) });
    // The second of its three outputs is too large alone.
    h.committer.complete("11", { ...completion("y"), outputs: outputs("y", [10, 50_000, 10]) });
    h.committer.complete("12", completion("z"));
    await h.committer.flush();
    expect(h.failures).toEqual([]);
    expect(publisher.units).toHaveLength(1);
    const unit = publisher.units[0] as PublishUnit;
    expect(unit.nextOffset).toBe("13");
    expect(unit.outputs.map((m) => `${m.topic}:${m.key === null ? "-" : String(m.key)}`)).toEqual([
      "results:x-0",
      "results:x-1",
      "dlq:-",
      "results:z",
    ]);
    expect(segmentIds(unit.bookkeeping)).toEqual(["x", "y", "z"]);
    expect(h.seen.outcomes.map((o) => o.outcome)).toEqual(["result", "dead_letter", "result"]);
    expect(h.seen.outcomes[1]?.deadLetter).toMatchObject({ offset: "11", stage: "deliver" });
    expect(h.seen.transactions.map((t) => t.outcome).at(-1)).toBe("committed");
    expect(h.seen.transactions.filter((t) => t.outcome === "committed")).toHaveLength(1);
  });

  it("fails when the dead letter that replaced a refused record is refused too (replaced once)", async () => {
    const refuses = (send: readonly OutboundMessage[]) =>
      holdsAbove(1_000)(send) || send.some((m) => m.topic === "dlq");
    const publisher = new SendingPublisher(refuses);
    const h = setup({ deadLetterTopic: "dlq" }, publisher);
    h.committer.track("0");
    h.committer.track("1");
    h.committer.complete("0", completion("a"));
    h.committer.complete("1", completion("huge", 50_000));
    await expect(h.committer.flush()).rejects.toMatchObject({
      code: "PUBLISH_TOO_LARGE",
      context: { records: 1 },
    });
    expect(publisher.units).toEqual([]);
    expect(h.failures).toHaveLength(1);
  });

  it.each([
    ["a changelog entry", "changelog"],
    ["a run cost share", "runs"],
  ])(
    "fails when the record refused alone is no completion's output (%s): nothing replaces it",
    async (_, topic) => {
      const publisher = new SendingPublisher((send) => send.some((m) => m.topic === topic));
      const h = setup({ deadLetterTopic: "dlq", runCostTopic: "runs" }, publisher);
      h.committer.track("0");
      h.committer.complete("0", {
        ...completion("a"),
        runCost: { runId: "r1", items: 1, tokens: 3, cpuMs: 2 },
      });
      await expect(h.committer.flush()).rejects.toMatchObject({ code: "PUBLISH_TOO_LARGE" });
      expect(publisher.units).toEqual([]);
      expect(h.seen.transactions.map((t) => t.outcome)).toContain("failed");
    },
  );

  it("fails (sticky, once) when a record is refused alone and there is no dead-letter topic", async () => {
    const publisher = new FakePublisher(() => tooLarge());
    const h = setup({}, publisher);
    h.committer.track("0");
    h.committer.complete("0", completion("a"));
    await expect(h.committer.flush()).rejects.toMatchObject({ code: "PUBLISH_TOO_LARGE" });
    expect(h.failures.map((f) => f.code)).toEqual(["PUBLISH_TOO_LARGE"]);
    expect(() => h.committer.track("1")).toThrow(/refused/);
  });
});

describe("PartitionCommitter: sticky failures", () => {
  it("reports a failed transaction once, stops the cadence and refuses further work", async () => {
    const publisher = new FakePublisher(() => new SluiceError("TRANSACTION_FAILED", "broker hiccup (fake)"));
    const h = setup({}, publisher);
    h.committer.track("0");
    h.committer.complete("0", completion("a"));
    h.clock.advance(100);
    await settle();
    expect(h.failures.map((f) => f.code)).toEqual(["TRANSACTION_FAILED"]);
    expect(h.seen.transactions).toMatchObject([{ outcome: "failed", records: 1 }]);
    expect(h.clock.timers.size).toBe(0);
    expect(() => h.committer.track("1")).toThrow(/hiccup/);
    h.committer.complete("0", completion("again"));
    await h.committer.close({ commit: true });
    expect(h.failures).toHaveLength(1);
  });

  it("names a fenced failure as fenced in its event", async () => {
    const h = setup({}, new FakePublisher(() => new SluiceError("PRODUCER_FENCED", "fenced (fake)")));
    h.committer.track("0");
    h.committer.complete("0", completion("a"));
    await expect(h.committer.flush()).rejects.toMatchObject({ code: "PRODUCER_FENCED" });
    expect(h.seen.transactions.map((t) => t.outcome)).toEqual(["fenced"]);
  });
});

describe("PartitionCommitter: commits yield to the SLO guard (commitShare)", () => {
  it("share 0.5 spaces the cadence to commitIntervalMs ÷ 0.5", async () => {
    const { clock, committer, publisher } = setup({ commitShare: () => 0.5 });
    committer.track("0");
    committer.complete("0", completion("a"));
    clock.advance(100);
    await settle();
    expect(publisher.units).toHaveLength(0);
    clock.advance(100);
    await settle();
    expect(publisher.units).toHaveLength(1);
    await committer.close({ commit: true });
  });

  it("a spaced partition still commits at once when a transaction's worth waits, on flush and on close", async () => {
    const { committer, publisher } = setup({ commitShare: () => 0.25, maxTransactionRecords: 2 });
    for (const offset of ["0", "1"]) {
      committer.track(offset);
      committer.complete(offset, completion(`r${offset}`));
    }
    await settle();
    expect(publisher.units.flatMap(keysOf)).toEqual(["r0", "r1"]);
    committer.track("2");
    committer.complete("2", completion("r2"));
    await committer.flush();
    committer.track("3");
    committer.complete("3", completion("r3"));
    await committer.close({ commit: true });
    expect(publisher.units.flatMap(keysOf)).toEqual(["r0", "r1", "r2", "r3"]);
  });
});

describe("PartitionCommitter: attached units (a model switch boundary)", () => {
  const boundary = (atOffset: string, onCommitted: () => void = () => {}) => ({
    outputs: [{ topic: "control", key: `boundary@${atOffset}`, value: "b" }],
    bookkeeping: [{ topic: "changelog", partition: 0, key: "boundary", value: "b" }],
    atOffset,
    onCommitted,
  });

  it("rides with the first transaction whose offset reaches the boundary, never an earlier one", async () => {
    const h = setup();
    let committed = 0;
    for (const o of ["10", "11", "12"]) h.committer.track(o);
    // Records 10 and 11 were taken before the switch; 12 is the first at the boundary.
    h.committer.attach(boundary("12", () => committed++));
    h.committer.complete("10", completion("a"));
    h.committer.complete("11", completion("b"));
    await settle();
    h.clock.advance(100);
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a", "b", "boundary@12"]]);
    expect(h.publisher.units[0]?.nextOffset).toBe("12");
    // nextOffset 12 covers everything below the boundary: the boundary goes with it.
    expect(h.publisher.units[0]?.bookkeeping.map((m) => String(m.key))).toContain("boundary");
    expect(committed).toBe(1);
    h.committer.complete("12", completion("c"));
    h.clock.advance(100);
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a", "b", "boundary@12"], ["c"]]);
  });

  it("waits for the records below the boundary when they are not complete yet", async () => {
    const h = setup();
    for (const o of ["5", "6"]) h.committer.track(o);
    h.committer.attach(boundary("7"));
    h.committer.complete("5", completion("a"));
    h.clock.advance(100);
    await settle();
    // Offset 6 commits only with 6's outputs: the boundary (7) does not ride below it.
    expect(h.publisher.units.map(keysOf)).toEqual([["a"]]);
    h.committer.complete("6", completion("b"));
    h.clock.advance(100);
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["a"], ["b", "boundary@7"]]);
    expect(h.publisher.units[1]?.nextOffset).toBe("7");
  });

  it("goes alone, at its offset, when nothing is tracked (an idle partition switches too)", async () => {
    const h = setup({ offsetCheckpoint: { topic: "changelog", partition: 0 } });
    let committed = 0;
    h.committer.attach(boundary("42", () => committed++));
    await settle();
    expect(h.publisher.units.map(keysOf)).toEqual([["boundary@42"]]);
    expect(h.publisher.units[0]?.nextOffset).toBe("42");
    expect(h.publisher.units[0]?.bookkeeping.map((m) => m.value)).toContain("42"); // the checkpoint
    expect(committed).toBe(1);
  });

  it("a failed transaction keeps it for nobody: the committer is dead and the boundary never reported", async () => {
    const fail = new FakePublisher(() => new SluiceError("TRANSACTION_FAILED", "broker (fake)"));
    const h = setup({}, fail);
    let committed = 0;
    h.committer.attach(boundary("3", () => committed++));
    await settle();
    expect(committed).toBe(0);
    expect(h.failures.map((e) => e.code)).toEqual(["TRANSACTION_FAILED"]);
  });
});

describe("PartitionCommitter: transaction spans (tracing on, in memory)", () => {
  /** Completions carrying request spans that already went through a micro-batch. */
  async function traced(ids: string[]) {
    const t = await inMemoryTracing();
    const tracer = t.tracing.tracer;
    const items = ids.map((id, i) => {
      const span = tracer.startRequest("requests", 0, { offset: String(i) }, "online");
      span.queued();
      return { span, id };
    });
    tracer.startBatch("online", "size", items).end();
    const completions = items.map(({ span, id }) => {
      const c: RecordCompletion = { ...completion(id), span };
      span.completed(c);
      return c;
    });
    return { t, tracer, completions };
  }
  /** Tracks and completes `completions` at offsets 0, 1, ... */
  const deliver = (committer: PartitionCommitter, completions: RecordCompletion[]) => {
    for (const [i] of completions.entries()) committer.track(String(i));
    for (const [i, c] of completions.entries()) committer.complete(String(i), c);
  };
  /** The transaction spans in the micro-batch's trace (not the copies under the request spans). */
  const batchLevel = (spans: ReadableSpan[], name: string) => {
    const ids = new Set(requests(spans).map((s) => s.spanContext().spanId));
    return spans.filter((s) => s.name === name && !ids.has(s.parentSpanContext?.spanId ?? ""));
  };
  const requests = (spans: ReadableSpan[]) => spans.filter((s) => s.name === "request requests");

  it("a commit ends the transaction span (sent, committed) and then each request span", async () => {
    const { t, tracer, completions } = await traced(["a", "b"]);
    const h = setup({ tracer });
    deliver(h.committer, completions);
    await h.committer.flush();
    const spans = await t.finished();
    const tx = spans.filter((s) => s.name === "commit requests" && s.parentSpanContext?.spanId !== undefined);
    // The batch's transaction span and each request's own copy.
    expect(tx).toHaveLength(3);
    for (const span of tx) expect(span.attributes["sluice.transaction.outcome"]).toBe("committed");
    expect(requests(spans)).toHaveLength(2);
    for (const span of requests(spans)) expect(span.attributes["sluice.commit_ms"]).toBeGreaterThanOrEqual(0);
    expect(batchLevel(spans, "commit requests")[0]?.attributes["messaging.batch.message_count"]).toBe(2);
    await t.tracing.shutdown();
  });

  it("the publisher is told when the unit is sent (tracing on only)", async () => {
    const { t, tracer, completions } = await traced(["a"]);
    const sent: PublishUnit[] = [];
    const publisher = new FakePublisher();
    publisher.publish = async (unit) => {
      sent.push(unit);
      unit.sent?.();
    };
    const h = setup({ tracer }, publisher);
    h.committer.track("0");
    h.committer.complete("0", completions[0]!);
    await h.committer.flush();
    expect(typeof sent[0]?.sent).toBe("function");
    const spans = await t.finished();
    for (const span of spans.filter((s) => s.name === "commit requests"))
      expect(span.events.map((e) => e.name)).toEqual(["sent"]);
    const off = setup();
    off.committer.track("0");
    off.committer.complete("0", completion("x"));
    await off.committer.flush();
    expect(off.publisher.units[0]?.sent).toBeUndefined();
    await t.tracing.shutdown();
  });

  it("a too-large unit aborts its transaction span, the request spans stay open, and the retry commits them", async () => {
    const { t, tracer, completions } = await traced(["a", "b"]);
    // Two outputs fit the first bound (150 estimated bytes) and are refused; the halved bound sends one at a time.
    const h = setup({ tracer }, new SendingPublisher((send) => send.length > 1, 150));
    deliver(h.committer, completions);
    await h.committer.flush();
    const spans = await t.finished();
    const outcomes = batchLevel(spans, "commit requests").map(
      (s) => s.attributes["sluice.transaction.outcome"],
    );
    expect(outcomes).toEqual(["aborted", "committed"]);
    expect(batchLevel(spans, "commit requests")[0]?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: "aborted PUBLISH_TOO_LARGE",
    });
    for (const span of requests(spans)) expect(span.status.code).toBe(SpanStatusCode.UNSET);
    await t.tracing.shutdown();
  });

  it("a failed transaction gives its records up (request spans end with the code); close ends the rest", async () => {
    const { t, tracer, completions } = await traced(["a", "b", "c"]);
    const fenced = new SluiceError("PRODUCER_FENCED", "fenced (fake)");
    const h = setup({ tracer }, new FakePublisher(() => fenced));
    for (const o of ["0", "1", "2", "3"]) h.committer.track(o);
    h.committer.complete("0", completions[0]!);
    h.committer.complete("1", completions[1]!);
    await h.committer.flush().catch(() => undefined);
    let spans = await t.finished();
    expect(batchLevel(spans, "commit requests")[0]?.attributes["sluice.transaction.outcome"]).toBe("fenced");
    expect(requests(spans).map((s) => s.status.message)).toEqual([
      "aborted PRODUCER_FENCED",
      "aborted PRODUCER_FENCED",
    ]);

    // A clean close: what was completed but could not commit (behind offset 3) is given up.
    const { t: t2, tracer: tracer2, completions: more } = await traced(["d"]);
    const h2 = setup({ tracer: tracer2 });
    h2.committer.track("0");
    h2.committer.track("1");
    h2.committer.complete("1", more[0]!);
    await h2.committer.close({ commit: true });
    spans = await t2.finished();
    expect(requests(spans).map((s) => s.status.message)).toEqual([`aborted ${NOT_COMMITTED}`]);
    await t.tracing.shutdown();
    await t2.tracing.shutdown();
  });
});
