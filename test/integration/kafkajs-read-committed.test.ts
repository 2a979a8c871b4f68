import type { KafkaMessage, Producer, Transaction } from "kafkajs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";

// kafkajs 2.2.4 activates at most one aborted transaction per message, so a read_committed fetch that
// starts inside several overlapping aborted transactions delivers aborted records (see
// src/kafka/protocol/aborted-transaction-order.ts). This builds such a log on a real broker, with committed
// and non-transactional records interleaved that must still be delivered, and reads it from several
// start offsets, including one batch per fetch.

/** The log, in offset order. Markers are written by abort()/commit() and never delivered. */
const LAYOUT = [
  "x1-aborted", //  P1, transaction A1 (aborted)
  "c1-committed", // P3, transaction C1 (committed)
  "y1-aborted", //  P2, transaction A2 (aborted)
  "n1-plain", //    idempotent producer, no transaction
  "y2-aborted", //  P2, A2
  "c2-committed", // P3, C1
  "x2-aborted", //  P1, A1
  "<P1 abort>",
  "x3-committed", // P1 again, a new transaction C2 after its abort marker (same producer id)
  "y3-aborted", //  P2, A2
  "<P2 abort>",
  "<P1 commit>",
  "<P3 commit>",
  "c3-committed", // P3, transaction C3: last record, readers stop here
  "<P3 commit>",
];
const DATA = LAYOUT.filter((v) => !v.startsWith("<"));
const DELIVERABLE = DATA.filter((v) => !v.endsWith("-aborted"));
const LAST = "c3-committed";

interface Read {
  offset: number;
  value: string;
}

async function read(
  topic: string,
  opts: { readUncommitted: boolean; startOffset: number; maxBytesPerPartition?: number },
): Promise<Read[]> {
  const kafka = testKafka();
  const groupId = uniqueName("rc-reader");
  // Start the group at an exact offset (no race with an initial fetch from the beginning).
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.setOffsets({
      groupId,
      topic,
      partitions: [{ partition: 0, offset: String(opts.startOffset) }],
    });
  } finally {
    await admin.disconnect();
  }
  const consumer = kafka.consumer({
    groupId,
    readUncommitted: opts.readUncommitted,
    ...(opts.maxBytesPerPartition !== undefined ? { maxBytesPerPartition: opts.maxBytesPerPartition } : {}),
  });
  const seen: Read[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic });
    let done = (): void => {};
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    await consumer.run({
      eachMessage: async ({ message }: { message: KafkaMessage }) => {
        const value = message.value?.toString() ?? "";
        seen.push({ offset: Number(message.offset), value });
        if (value === LAST) done();
      },
    });
    await Promise.race([finished, new Promise((r) => setTimeout(r, 20_000))]);
  } finally {
    await consumer.disconnect();
  }
  return seen;
}

describe("kafkajs read_committed with overlapping aborted transactions", () => {
  const topic = uniqueName("rc-overlap");
  const producers: Producer[] = [];

  beforeAll(async () => {
    await createTopics([{ topic, numPartitions: 1 }]);
    const kafka = testKafka();
    const transactional = (name: string) =>
      kafka.producer({ transactionalId: `${topic}-${name}`, idempotent: true, maxInFlightRequests: 1 });
    const p1 = transactional("p1");
    const p2 = transactional("p2");
    const p3 = transactional("p3");
    const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    producers.push(p1, p2, p3, plain);
    await Promise.all(producers.map((p) => p.connect()));
    // One send per record, so every record is its own batch at the offset LAYOUT says.
    const send = async (via: Transaction | Producer, value: string) => {
      await via.send({ topic, messages: [{ partition: 0, key: value, value }] });
    };
    const a1 = await p1.transaction();
    await send(a1, "x1-aborted");
    const c1 = await p3.transaction();
    await send(c1, "c1-committed");
    const a2 = await p2.transaction();
    await send(a2, "y1-aborted");
    await send(plain, "n1-plain");
    await send(a2, "y2-aborted");
    await send(c1, "c2-committed");
    await send(a1, "x2-aborted");
    await a1.abort();
    const c2 = await p1.transaction();
    await send(c2, "x3-committed");
    await send(a2, "y3-aborted");
    await a2.abort();
    await c2.commit();
    await c1.commit();
    const c3 = await p3.transaction();
    await send(c3, LAST);
    await c3.commit();
    fixAbortedTransactionOrder();
  }, 60_000);

  afterAll(async () => {
    await Promise.allSettled(producers.map((p) => p.disconnect()));
  });

  it("delivers exactly the committed and non-transactional records from any start offset", async () => {
    const offsetOf = (value: string) => LAYOUT.indexOf(value);

    const cases = [
      { startOffset: 0 },
      { startOffset: offsetOf("y1-aborted") }, // inside A1, at A2's first record
      { startOffset: offsetOf("y2-aborted") }, // inside A1 and A2: the reviewer's case
      { startOffset: offsetOf("x2-aborted") },
      { startOffset: 0, maxBytesPerPartition: 1 }, // one batch per fetch: every fetch starts mid-way
    ];
    const [all, ...reads] = await Promise.all([
      read(topic, { readUncommitted: true, startOffset: 0 }),
      ...cases.map((c) => read(topic, { readUncommitted: false, ...c })),
    ]);
    // The log as a read_uncommitted reader sees it: the aborted records are really there, interleaved.
    expect(all?.map((r) => r.value)).toEqual(DATA);
    expect(all?.map((r) => r.offset)).toEqual(DATA.map(offsetOf));
    const expected = (startOffset: number) =>
      DELIVERABLE.filter((v) => offsetOf(v) >= startOffset).map((v) => ({ offset: offsetOf(v), value: v }));
    // One assertion over every case, so a failure shows all the start offsets that went wrong.
    expect(cases.map((c, i) => ({ ...c, read: reads[i] }))).toEqual(
      cases.map((c) => ({ ...c, read: expected(c.startOffset) })),
    );
  }, 90_000);
});
