import { kafkajsModule } from "./kafkajs-module.js";

/**
 * Fetch responses decoded in one pass over the record batches (issue 30: "decode straight from the
 * buffers"), in place of kafkajs 2.2.4's per-record decoder, which was the largest kafkajs cost on
 * the consuming side at the ceiling.
 *
 * kafkajs (`src/protocol/recordBatch/record/v0/decoder.js`) builds, for every record, a `Decoder`
 * object, parses its batch's first offset and first timestamp from their decimal strings into `Long`s
 * (twice per record), adds the deltas as `Long`s and prints them back, decodes each varlong through
 * `Long` shifts, and builds the headers object by spreading it once per header. This module reads the
 * same bytes with plain numbers: the batch's base offset and base timestamp once per batch, each
 * record's offset and timestamp as base + delta in double arithmetic when the result is a safe
 * integer (always, for real offsets and epoch-ms timestamps; BigInt otherwise), and every field at
 * its position in the one buffer.
 *
 * What comes out is what kafkajs's own decoder returns, field for field: the same partition objects,
 * the same record objects (`magicByte`, `attributes`, `timestamp`, `offset`, `key`, `value`,
 * `headers` with repeated names as arrays, `isControlRecord`, and one shared `batchContext` per
 * batch), so kafkajs's consumer and Sluice's read_committed filter (aborted-transaction-order.ts)
 * work on them unchanged. test/unit/kafka/protocol/fetch-decoding.test.ts holds it to kafkajs's
 * decoder on the same bytes. Compressed batches and legacy (magic 0/1) message sets go to kafkajs's
 * own decoders.
 *
 * Where: Fetch v11, the version kafkajs uses with every broker since Kafka 2.3 (its highest); kafkajs
 * calls `decode` through the module object on every request, so clients created before or after are
 * covered. Older fetch versions keep kafkajs's decoder. Applied once per process (a marker on the
 * function, shared across module instances through `Symbol.for`), and before the read_committed
 * filter wraps it (that module applies this one first).
 */
const INSTALLED = Symbol.for("sluice.kafkajs.fetchDecoding");
/** aborted-transaction-order.ts's marker: a decode it wrapped already is left alone (see there). */
const FILTERED = Symbol.for("sluice.kafkajs.readCommittedFilter");

/** The v2 record batch header up to and including the record count (FirstOffset … Records length). */
const BATCH_HEADER_BYTES = 61;
/** kafkajs's bound for "another batch may follow" (`RECORD_BATCH_OVERHEAD` in fetch/v4/decodeMessages.js). */
const RECORD_BATCH_OVERHEAD = 49;
/** Where the magic byte sits in every message format (`MAGIC_OFFSET` there). */
const MAGIC_OFFSET = 16;
const RECORD_BATCH_MAGIC = 2;
const COMPRESSION_MASK = 0x07;
const TIMESTAMP_TYPE_FLAG_MASK = 0x08;
const TRANSACTIONAL_FLAG_MASK = 0x10;
const CONTROL_FLAG_MASK = 0x20;
/** kafkajs's TimestampTypes. */
const CREATE_TIME = 0;
const LOG_APPEND_TIME = 1;

/** kafkajs's protocol `Decoder` (the parts used here). */
interface KafkajsDecoder {
  buffer: Buffer;
  offset: number;
  readInt16(): number;
  readInt32(): number;
  readInt64(): { toString(): string };
  readString(): string;
  readBytes(length?: number): Buffer | null;
  canReadBytes(length: number): boolean;
  readArray<T>(reader: (decoder: KafkajsDecoder) => T): T[];
  readArrayAsync<T>(reader: (decoder: KafkajsDecoder) => Promise<T>): Promise<T[]>;
}
type DecoderClass = new (buffer: Buffer) => KafkajsDecoder;

/** The batch facts every record of a batch shares (kafkajs's `recordContext` plus `magicByte`). */
interface BatchContext {
  firstOffset: string;
  firstTimestamp: string;
  partitionLeaderEpoch: number;
  inTransaction: boolean;
  isControlBatch: boolean;
  lastOffsetDelta: number;
  producerId: string;
  producerEpoch: number;
  firstSequence: number;
  maxTimestamp: string;
  timestampType: number;
  magicByte: number;
}

export interface DecodedRecord {
  magicByte: number;
  attributes: number;
  timestamp: string;
  offset: string;
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | null | (Buffer | null)[]>;
  isControlRecord: boolean;
  batchContext: BatchContext;
}

interface Kafkajs {
  Decoder: DecoderClass;
  /** recordBatch/v0/decoder.js: one batch at the decoder's position (compressed batches). */
  recordBatch(decoder: KafkajsDecoder): Promise<{ records: unknown[] }>;
  /** messageSet/decoder.js: legacy message sets. */
  messageSet(decoder: KafkajsDecoder, size: number): unknown[];
}

let kafkajs: Kafkajs | undefined;
function modules(): Kafkajs {
  kafkajs ??= {
    Decoder: kafkajsModule<DecoderClass>("protocol", "decoder.js"),
    recordBatch: kafkajsModule<Kafkajs["recordBatch"]>("protocol", "recordBatch", "v0", "decoder.js"),
    messageSet: kafkajsModule<Kafkajs["messageSet"]>("protocol", "messageSet", "decoder.js"),
  };
  return kafkajs;
}

/** Thrown for bytes that cannot be a record batch (kafkajs fails on them too, less clearly). */
class FetchDecodeError extends Error {
  override name = "KafkaJSProtocolError";
}

/**
 * The records of one partition's record set, at the decoder's position (kafkajs's `decodeMessages`
 * of fetch/v4, which v5–v11 share): the size, then record batches until fewer than 49 bytes are
 * left or the next batch is cut short by the fetch's byte limit.
 */
async function decodeRecordSet(decoder: KafkajsDecoder): Promise<unknown[]> {
  const size = decoder.readInt32();
  if (size <= 0 || !decoder.canReadBytes(size)) return [];
  const buffer = decoder.readBytes(size) as Buffer;
  if (buffer.length <= MAGIC_OFFSET) return [];
  if (buffer.readInt8(MAGIC_OFFSET) !== RECORD_BATCH_MAGIC) {
    const { Decoder, messageSet } = modules();
    return messageSet(new Decoder(buffer), size);
  }
  const records: unknown[] = [];
  let pos = 0;
  while (buffer.length - pos >= RECORD_BATCH_OVERHEAD) {
    const length = buffer.readInt32BE(pos + 8);
    const end = pos + 12 + length;
    // A batch the broker cut at the fetch's byte limit: the rest comes with the next fetch.
    if (end > buffer.length) break;
    if ((buffer.readInt16BE(pos + 21) & COMPRESSION_MASK) !== 0) {
      const { Decoder, recordBatch } = modules();
      const batchDecoder = new Decoder(buffer);
      batchDecoder.offset = pos;
      const batch = await recordBatch(batchDecoder);
      for (const record of batch.records) records.push(record);
    } else {
      decodeBatch(buffer, pos, end, records);
    }
    pos = end;
  }
  return records;
}

/** One uncompressed v2 record batch in `buffer[start, end)`, its records appended to `out`. */
function decodeBatch(buffer: Buffer, start: number, end: number, out: unknown[]): void {
  if (end - start < BATCH_HEADER_BYTES) {
    throw new FetchDecodeError(`record batch at ${start} is ${end - start} bytes, shorter than its header`);
  }
  const baseOffset = buffer.readBigInt64BE(start);
  const attributes = buffer.readInt16BE(start + 21);
  const baseTimestamp = buffer.readBigInt64BE(start + 27);
  const isControlBatch = (attributes & CONTROL_FLAG_MASK) !== 0;
  const context: BatchContext = {
    firstOffset: baseOffset.toString(),
    firstTimestamp: baseTimestamp.toString(),
    partitionLeaderEpoch: buffer.readInt32BE(start + 12),
    inTransaction: (attributes & TRANSACTIONAL_FLAG_MASK) !== 0,
    isControlBatch,
    lastOffsetDelta: buffer.readInt32BE(start + 23),
    producerId: buffer.readBigInt64BE(start + 43).toString(),
    producerEpoch: buffer.readInt16BE(start + 51),
    firstSequence: buffer.readInt32BE(start + 53),
    maxTimestamp: buffer.readBigInt64BE(start + 35).toString(),
    timestampType: (attributes & TIMESTAMP_TYPE_FLAG_MASK) !== 0 ? LOG_APPEND_TIME : CREATE_TIME,
    magicByte: RECORD_BATCH_MAGIC,
  };
  const count = buffer.readInt32BE(start + 57);
  const offsetBase = safeNumber(baseOffset);
  const timestampBase = context.timestampType === LOG_APPEND_TIME ? undefined : safeNumber(baseTimestamp);
  const reader = new RecordReader(buffer, start + BATCH_HEADER_BYTES, end);
  for (let i = 0; i < count; i++) {
    const length = reader.varInt();
    const recordEnd = reader.pos + length;
    if (length < 0 || recordEnd > end) {
      throw new FetchDecodeError(
        `record ${i} of the batch at offset ${context.firstOffset} overruns its batch`,
      );
    }
    reader.end = recordEnd;
    const recordAttributes = buffer.readInt8(reader.pos++);
    const timestampDelta = reader.varLong();
    const offsetDelta = reader.varInt();
    const key = reader.bytes();
    const value = reader.bytes();
    const headers = reader.headers();
    reader.pos = recordEnd;
    reader.end = end;
    out.push({
      magicByte: RECORD_BATCH_MAGIC,
      attributes: recordAttributes,
      timestamp:
        timestampBase === undefined
          ? context.timestampType === LOG_APPEND_TIME
            ? context.maxTimestamp
            : (baseTimestamp + BigInt(timestampDelta)).toString()
          : sum(timestampBase, timestampDelta, baseTimestamp),
      offset:
        offsetBase === undefined
          ? (baseOffset + BigInt(offsetDelta)).toString()
          : sum(offsetBase, offsetDelta, baseOffset),
      key,
      value,
      headers,
      isControlRecord: isControlBatch,
      batchContext: context,
    } satisfies DecodedRecord);
  }
}

/** `base + delta` as a decimal string: in doubles when exact, else in BigInt. */
function sum(base: number, delta: number | bigint, exact: bigint): string {
  if (typeof delta === "number") {
    const n = base + delta;
    if (Number.isSafeInteger(n)) return String(n);
  }
  return (exact + BigInt(delta)).toString();
}

function safeNumber(n: bigint): number | undefined {
  return n >= -9007199254740991n && n <= 9007199254740991n ? Number(n) : undefined;
}

/** Reads a record's fields from the batch's buffer (varints as kafkajs reads them, zig-zag). */
class RecordReader {
  constructor(
    private readonly buffer: Buffer,
    public pos: number,
    public end: number,
  ) {}

  private byte(): number {
    if (this.pos >= this.end) throw new FetchDecodeError("a record field runs past the end of its record");
    return this.buffer[this.pos++] as number;
  }

  /** A zig-zag varint of at most 32 bits (kafkajs's `readVarInt`). */
  varInt(): number {
    let result = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = this.byte();
      result += (byte & 0x7f) << shift;
      shift += 7;
    } while (byte >= 0x80);
    return (result >>> 1) ^ -(result & 1);
  }

  /** A zig-zag varlong: a number while it is a safe integer, else a bigint. */
  varLong(): number | bigint {
    const start = this.pos;
    let result = 0;
    let scale = 1;
    let byte: number;
    do {
      byte = this.byte();
      result += (byte & 0x7f) * scale;
      scale *= 128;
    } while (byte >= 0x80 && scale < 2 ** 49);
    if (byte < 0x80) return result % 2 === 0 ? result / 2 : -(result + 1) / 2;
    this.pos = start;
    return this.bigVarLong();
  }

  private bigVarLong(): bigint {
    let result = 0n;
    let shift = 0n;
    let byte: number;
    do {
      if (shift > 63n) throw new FetchDecodeError("a varlong is longer than 10 bytes");
      byte = this.byte();
      result |= BigInt(byte & 0x7f) << shift;
      shift += 7n;
    } while (byte >= 0x80);
    result = BigInt.asUintN(64, result);
    return BigInt.asIntN(64, (result >> 1n) ^ -(result & 1n));
  }

  /** Varint-length bytes: null for length -1, else a view of the fetch's buffer (as kafkajs's). */
  bytes(): Buffer | null {
    const length = this.skipBytes();
    return length === -1 ? null : this.buffer.subarray(this.pos - length, this.pos);
  }

  /** Steps over varint-length bytes, which end at `pos`; their length, -1 for null. */
  private skipBytes(): number {
    const length = this.varInt();
    if (length === -1) return -1;
    this.pos += length;
    if (length < 0 || this.pos > this.end) {
      throw new FetchDecodeError("a record's key, value or header runs past the end of its record");
    }
    return length;
  }

  /**
   * A header's name as kafkajs gives it (UTF-8; "null" for a null name). Names repeat on every record
   * (content-type, x-request-id, …): a known one is matched in place, with no view or string made.
   */
  private headerName(): string {
    const length = this.skipBytes();
    if (length === -1) return "null";
    const from = this.pos - length;
    for (const known of KNOWN_NAMES) {
      if (known.bytes.length === length && sameBytes(known.bytes, this.buffer, from)) return known.name;
    }
    const name = this.buffer.toString("utf8", from, this.pos);
    if (KNOWN_NAMES.length < MAX_KNOWN_NAMES) {
      KNOWN_NAMES.push({ bytes: Buffer.from(this.buffer.subarray(from, this.pos)), name });
    }
    return name;
  }

  /** The record's headers as kafkajs gives them: a name seen twice holds an array of its values. */
  headers(): Record<string, Buffer | null | (Buffer | null)[]> {
    const headers: Record<string, Buffer | null | (Buffer | null)[]> = {};
    const count = this.varInt();
    for (let i = 0; i < count; i++) {
      const key = this.headerName();
      const value = this.bytes();
      const seen = Object.hasOwn(headers, key) ? headers[key] : undefined;
      const next = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
      if (key === "__proto__") {
        // An own property, as kafkajs's object spread makes it (an assignment would set the prototype).
        Object.defineProperty(headers, key, {
          value: next,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      } else {
        headers[key] = next;
      }
    }
    return headers;
  }
}

/** Header names decoded so far, the first `MAX_KNOWN_NAMES` distinct ones of the process. */
const KNOWN_NAMES: { bytes: Buffer; name: string }[] = [];
const MAX_KNOWN_NAMES = 16;

function sameBytes(known: Buffer, buffer: Buffer, from: number): boolean {
  for (let i = 0; i < known.length; i++) if (known[i] !== buffer[from + i]) return false;
  return true;
}

/** Fetch v11's response (kafkajs's fetch/v11/response.js), its record sets read by `decodeRecordSet`. */
export async function decodeFetchV11(raw: Buffer): Promise<unknown> {
  const decoder = new (modules().Decoder)(raw);
  const clientSideThrottleTime = decoder.readInt32();
  const errorCode = decoder.readInt16();
  const sessionId = decoder.readInt32();
  const responses = await decoder.readArrayAsync(async (d) => ({
    topicName: d.readString(),
    partitions: await d.readArrayAsync(async (p) => ({
      partition: p.readInt32(),
      errorCode: p.readInt16(),
      highWatermark: p.readInt64().toString(),
      lastStableOffset: p.readInt64().toString(),
      lastStartOffset: p.readInt64().toString(),
      abortedTransactions: p.readArray((a) => ({
        producerId: a.readInt64().toString(),
        firstOffset: a.readInt64().toString(),
      })),
      preferredReadReplica: p.readInt32(),
      messages: await decodeRecordSet(p),
    })),
  }));
  // As kafkajs: a throttleTime of 0 (the broker expects the client to throttle itself).
  return { throttleTime: 0, clientSideThrottleTime, errorCode, sessionId, responses };
}

type Decode = ((raw: Buffer) => Promise<unknown>) & { [INSTALLED]?: true; [FILTERED]?: true };

/** Installs the one-pass decoder on kafkajs's Fetch v11 response module (once per process). */
export function fixFetchDecoding(): void {
  let mod: { decode?: Decode };
  try {
    mod = kafkajsModule("protocol", "requests", "fetch", "v11", "response.js");
  } catch {
    return; // a kafkajs without Fetch v11: its own decoders stay
  }
  // Under the read_committed filter, never in its place: that module installs this one first.
  if (typeof mod.decode !== "function" || mod.decode[INSTALLED] || mod.decode[FILTERED]) return;
  const decode: Decode = decodeFetchV11;
  decode[INSTALLED] = true;
  mod.decode = decode;
}
