import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { fixAbortedTransactionOrder } from "../../../../src/kafka/protocol/aborted-transaction-order.js";
import { decodeFetchV11, fixFetchDecoding } from "../../../../src/kafka/protocol/fetch-decoding.js";
import { picker, seededRandom } from "../../../support/seeded-random.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("kafkajs")), "src");
const kafkajs = <T>(...path: string[]): T => require(join(root, ...path)) as T;

interface Encoder {
  buffer: Buffer;
  writeInt8(v: number): Encoder;
  writeInt16(v: number): Encoder;
  writeInt32(v: number): Encoder;
  writeInt64(v: unknown): Encoder;
  writeString(v: string): Encoder;
  writeBuffer(v: Buffer): Encoder;
}
const EncoderClass = kafkajs<new () => Encoder>("protocol", "encoder.js");
const { RecordBatch } = kafkajs<{ RecordBatch: (args: Record<string, unknown>) => Promise<Encoder> }>(
  "protocol",
  "recordBatch",
  "v0",
  "index.js",
);
const Record = kafkajs<(args: Record<string, unknown>) => Encoder>(
  "protocol",
  "recordBatch",
  "record",
  "v0",
  "index.js",
);
const MessageSet = kafkajs<(args: Record<string, unknown>) => Encoder>("protocol", "messageSet", "index.js");
const Long = kafkajs<{ fromValue(v: unknown): unknown; fromString(v: string): unknown }>("utils", "long.js");

/**
 * kafkajs's own Fetch v11 decode, from a fresh copy of its module (the shared one may carry this
 * process's corrections already): the reference every decoded response is held to.
 */
function kafkajsFetchV11(): (raw: Buffer) => Promise<unknown> {
  const path = join(root, "protocol", "requests", "fetch", "v11", "response.js");
  const cached = require.cache[path];
  delete require.cache[path];
  try {
    return (require(path) as { decode: (raw: Buffer) => Promise<unknown> }).decode;
  } finally {
    if (cached) require.cache[path] = cached;
  }
}

/** Sets bits of a batch's attributes (control batch, log-append time) that kafkajs's encoder never sets. */
function withAttributes(batch: Buffer, bits: number): Buffer {
  const out = Buffer.from(batch);
  out.writeInt16BE(out.readInt16BE(21) | bits, 21);
  return out;
}

async function generatedRecordSet(r: () => number, now: number): Promise<Buffer> {
  const pick = picker(r);
  const word = () => pick(["a", "é", "€ z", "0", ""]);
  const bytes = () =>
    pick([
      () => null,
      () => Buffer.from(word() + word() + word()),
      () => Buffer.alloc(64 + Math.floor(r() * 300), 7), // two-byte length varints
      () => Buffer.alloc(0),
    ])();
  const headers = () =>
    pick([
      () => ({}),
      () => ({ "content-type": "application/json" }),
      () => ({
        traceparent: Buffer.from(word()),
        multi: [Buffer.from("a"), Buffer.from([0, 255]), Buffer.from("")],
      }),
      // Names the decoder has not seen, more than it keeps (40 here), some as long as a known one
      // ("content-typf") or in more than one byte per character.
      () => ({
        [pick(["content-typf", "ünïcödé", "€", "content-type"])]: Buffer.from(word()),
        [`n${Math.floor(r() * 40)}`]: Buffer.from("x"),
      }),
    ])();
  const parts: Buffer[] = [];
  let offset = pick([0, 17, 2 ** 40 + 3]);
  for (let b = Math.floor(r() * 4); b >= 0; b--) {
    const count = Math.floor(r() * 40);
    const records = Array.from({ length: count }, (_, i) =>
      Record({
        offsetDelta: i,
        timestampDelta: pick([0, 5, -3, 1_000_000, Long.fromString("562949953421312")]), // 2^49: a long varlong
        key: bytes(),
        value: bytes(),
        headers: headers(),
      }),
    );
    const batch = await RecordBatch({
      compression: pick([0, 0, 0, 1]), // GZIP batches go to kafkajs's own decoder
      firstOffset: Long.fromValue(offset),
      firstTimestamp: now - Math.floor(r() * 5000),
      maxTimestamp: now,
      lastOffsetDelta: Math.max(0, count - 1),
      transactional: r() < 0.5,
      producerId: Long.fromValue(pick([-1, 5, 2 ** 40 + 3])),
      producerEpoch: Math.floor(r() * 3),
      firstSequence: Math.floor(r() * 1000),
      records,
    });
    parts.push(withAttributes(batch.buffer, pick([0, 0, 0x08, 0x20])));
    offset += count;
  }
  const set = Buffer.concat(parts);
  // Sometimes the last batch is cut short, as a fetch's byte limit cuts it.
  return r() < 0.3 && parts.length > 1 ? set.subarray(0, set.length - Math.floor(r() * 60) - 1) : set;
}

/** A Fetch v11 response: per topic, its partitions' record sets (partition i holds the i-th). */
function response(topics: { name: string; sets: Buffer[] }[], sessionId = 0): Buffer {
  const e = new EncoderClass().writeInt32(0).writeInt16(0).writeInt32(sessionId).writeInt32(topics.length);
  for (const topic of topics) {
    e.writeString(topic.name).writeInt32(topic.sets.length);
    topic.sets.forEach((set, p) => {
      e.writeInt32(p).writeInt16(0).writeInt64(500).writeInt64(490).writeInt64(0);
      e.writeInt32(1).writeInt64(5).writeInt64(3); // one aborted transaction
      e.writeInt32(-1);
      e.writeInt32(set.length).writeBuffer(set);
    });
  }
  return e.buffer;
}

async function generatedResponse(seed: number): Promise<Buffer> {
  const r = seededRandom(seed);
  const now = 1_733_300_000_000;
  const topics: { name: string; sets: Buffer[] }[] = [];
  for (let t = 1 + Math.floor(r() * 2); t > 0; t--) {
    const sets: Buffer[] = [];
    for (let p = 1 + Math.floor(r() * 3); p > 0; p--) {
      const kind = r();
      if (kind < 0.1)
        sets.push(
          MessageSet({ messageVersion: 1, entries: [{ key: "k", value: "v", timestamp: now }] }).buffer,
        );
      else if (kind < 0.2) sets.push(Buffer.alloc(0));
      else sets.push(await generatedRecordSet(r, now));
    }
    topics.push({ name: `requests-${t}-é`, sets });
  }
  return response(topics, seed);
}

describe("decodeFetchV11", () => {
  it("decodes every generated response exactly as kafkajs does", async () => {
    const reference = kafkajsFetchV11();
    let records = 0;
    for (let seed = 1; seed <= 60; seed++) {
      const raw = await generatedResponse(seed);
      const expected = (await reference(raw)) as { responses: { partitions: { messages: unknown[] }[] }[] };
      const decoded = await decodeFetchV11(raw);
      expect(decoded, `seed ${seed}`).toEqual(expected);
      for (const topic of expected.responses) for (const p of topic.partitions) records += p.messages.length;
    }
    expect(records).toBeGreaterThan(1000); // the cases above really held records
  });

  it("keeps offsets and timestamps past 2^53 exact", async () => {
    const batch = await RecordBatch({
      firstOffset: Long.fromString("9007199254740993"),
      firstTimestamp: Long.fromString("9007199254740000"),
      maxTimestamp: Long.fromString("9007199254740999"),
      lastOffsetDelta: 1,
      records: [
        Record({ offsetDelta: 0, key: null, value: Buffer.from("a") }),
        Record({ offsetDelta: 1, timestampDelta: 995, value: Buffer.from("b") }),
      ],
    });
    const raw = response([{ name: "t", sets: [batch.buffer] }]);
    const decoded = (await decodeFetchV11(raw)) as {
      responses: { partitions: { messages: { offset: string; timestamp: string }[] }[] }[];
    };
    const messages = decoded.responses[0]?.partitions[0]?.messages ?? [];
    expect(messages.map((m) => [m.offset, m.timestamp])).toEqual([
      ["9007199254740993", "9007199254740000"],
      ["9007199254740994", "9007199254740995"],
    ]);
    expect(decoded).toEqual(await kafkajsFetchV11()(raw));
  });

  it("refuses a record that runs past its batch with an error naming it", async () => {
    const batch = await RecordBatch({ records: [Record({ key: null, value: Buffer.from("abc") })] });
    const cut = Buffer.from(batch.buffer);
    cut.writeInt32BE(cut.readInt32BE(8) - 2, 8); // the batch claims 2 bytes less than its record needs
    const set = cut.subarray(0, cut.length - 2);
    const raw = response([{ name: "t", sets: [set] }]);
    await expect(decodeFetchV11(raw)).rejects.toThrow(/runs past the end of its record|overruns its batch/);
  });
});

describe("fixFetchDecoding", () => {
  it("goes in once, underneath the read_committed filter, never in its place", async () => {
    const mod = kafkajs<{ decode: (raw: Buffer) => Promise<unknown> }>(
      "protocol",
      "requests",
      "fetch",
      "v11",
      "response.js",
    );
    fixAbortedTransactionOrder(); // installs the decoder first, then wraps it
    const installed = mod.decode;
    fixFetchDecoding();
    fixAbortedTransactionOrder();
    expect(mod.decode).toBe(installed);
    // The filter still runs: it empties the aborted-transaction list it consumed.
    const raw = await generatedResponse(7);
    const decoded = (await mod.decode(raw)) as {
      responses: { partitions: { abortedTransactions: unknown[] }[] }[];
    };
    for (const t of decoded.responses)
      for (const p of t.partitions) expect(p.abortedTransactions).toEqual([]);
  });
});
