import { describe, expect, it } from "vitest";
import { OUTPUT_TOO_LARGE } from "../../../src/delivery/completion-builder.js";
import type { RecordCompletion } from "../../../src/delivery/outbound-message.js";
import {
  OFFSET_CHECKPOINT_KEY,
  PartitionCommitter,
  type PartitionCommitterOptions,
  type PublishUnit,
  type ResultPublisher,
} from "../../../src/delivery/partition-committer.js";
import { type SluiceEventMap, SluiceEvents } from "../../../src/events/sluice-events.js";
import { SluiceError } from "../../../src/sluice-error.js";
import { FakeClock } from "../../support/fake-clock.js";

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

function completion(id: string, valueBytes = 10): RecordCompletion {
  return {
    outputs: [{ topic: "results", key: id, value: Buffer.alloc(valueBytes) }],
    changelog: [{ topic: "changelog", partition: 0, key: id, value: "1" }],
    outcome: "result",
    status: "ok",
    recordTimestampMs: 500,
  };
}

function setup(options: Partial<PartitionCommitterOptions> = {}, publisher = new FakePublisher()) {
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
  const committer = new PartitionCommitter(
    {
      topic: "requests",
      partition: 0,
      events,
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
    expect(unit.bookkeeping.map((m) => m.key)).toEqual(["a", OFFSET_CHECKPOINT_KEY]);
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

describe("PartitionCommitter: halving and the too-large dead letter", () => {
  it("halves a unit the broker refuses as too large, each half with its own offset", async () => {
    // The "broker" takes at most two records per unit.
    const publisher = new FakePublisher((u) => (u.outputs.length > 2 ? tooLarge() : undefined));
    const h = setup({}, publisher);
    for (let i = 0; i < 7; i++) h.committer.track(String(i));
    for (let i = 0; i < 7; i++) h.committer.complete(String(i), completion(`r${i}`));
    await h.committer.flush();
    expect(h.failures).toEqual([]);
    expect(publisher.units.flatMap(keysOf)).toEqual(Array.from({ length: 7 }, (_, i) => `r${i}`));
    for (const u of publisher.units) expect(u.outputs.length).toBeLessThanOrEqual(2);
    expect(publisher.units.at(-1)?.nextOffset).toBe("7");
    expect(h.seen.transactions.filter((t) => t.outcome === "aborted").length).toBe(publisher.refused.length);
    expect(h.seen.outcomes).toHaveLength(7);
  });

  it("replaces the outputs of a record refused alone by a payload-less dead letter, and its neighbours publish", async () => {
    const refusesBig = (u: PublishUnit) =>
      u.outputs.some((m) => ((m.value as Buffer | null)?.length ?? 0) > 1_000) ? tooLarge() : undefined;
    const publisher = new FakePublisher(refusesBig);
    const h = setup({ deadLetterTopic: "dlq" }, publisher);
    for (let i = 0; i < 4; i++) h.committer.track(String(i));
    h.committer.complete("0", completion("a"));
    h.committer.complete("1", completion("b"));
    h.committer.complete("2", completion("huge", 50_000));
    h.committer.complete("3", completion("d"));
    await h.committer.flush();
    expect(h.failures).toEqual([]);
    const outputs = publisher.units.flatMap((u) => u.outputs);
    expect(outputs.map((m) => m.topic)).toEqual(["results", "results", "dlq", "results"]);
    const dl = outputs[2];
    expect(dl?.key ?? null).toBeNull();
    expect(dl?.value ?? null).toBeNull();
    expect(String(dl?.headers?.["sluice.error.code"])).toBe(OUTPUT_TOO_LARGE);
    // Its changelog entry still goes out: the request id stays deduplicated.
    expect(publisher.units.flatMap((u) => u.bookkeeping).map((m) => m.key)).toEqual(["a", "b", "huge", "d"]);
    expect(h.seen.outcomes.map((o) => o.outcome)).toEqual(["result", "result", "dead_letter", "result"]);
    expect(publisher.units.at(-1)?.nextOffset).toBe("4");
  });

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
