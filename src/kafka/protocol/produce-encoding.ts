import { createRequire } from "node:module";
import { kafkajsModule } from "./kafkajs-module.js";
import { FRAME_ROOM, frameRequestsInPlace, withFrameRoom } from "./request-framing.js";

/**
 * Encodes kafkajs 2.2.4's Produce requests (v3–v7, uncompressed) in one pass into one exact-size
 * buffer, with a native CRC-32C, instead of kafkajs's encoder.
 *
 * Why: at Sluice's Kafka-path ceiling the main thread is the bound, and kafkajs's produce encoding
 * was its largest single cost after garbage collection (BENCHMARKS.md, "Where the main thread's time
 * goes"). kafkajs builds every record in a fresh zero-filled 512-byte `Encoder` that grows by
 * doubling (a 1.1 KB result is allocated three times), every header in another, every varint through
 * `Buffer.from([...])`, then copies each record into the batch body as it grows, and checksums the
 * body with a byte-at-a-time CRC-32C in JavaScript. `bench/produce-encoding-bench.ts` (a request of 333
 * 0.9 KB results and 333 dedup changelog entries): 8.7–9.9 µs per record with kafkajs's encoder,
 * 0.7–0.9 µs with this module (strings written straight into the request, header names encoded once),
 * on the project's 2-core machine.
 *
 * What: the request bytes are exactly kafkajs's (the unit test compares them on generated requests:
 * keys and values as buffers, strings and null; headers with array values; timestamps as strings,
 * numbers and unset), so the broker sees no difference. kafkajs still chooses the version, sends the
 * request and parses the response; only `encode` is replaced. Compressed requests and versions below
 * 3 keep kafkajs's encoder.
 *
 * Where: kafkajs looks up `requests.Produce.protocol` on the module object for every produce
 * (`src/broker/index.js` `produce` → `lookupRequest`), so wrapping `protocol` covers clients created
 * before or after. Applied once per process (a marker on the wrapped function); by `createKafka`.
 * The body is built with free room before it, so kafkajs frames it without copying it
 * (request-framing.ts, wrapped at the same time).
 */
const WRAPPED = Symbol.for("sluice.kafkajs.produceEncoding");
const MAGIC = 2;
const TRANSACTIONAL_MASK = 16;
const NONE = 0;

type Bytes = Buffer | string | null | undefined;
interface ProduceMessage {
  key?: Bytes;
  value?: Bytes;
  headers?: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
  timestamp?: string | number | null;
}
interface PartitionData {
  partition: number;
  firstSequence?: number;
  messages: ProduceMessage[];
}
export interface ProduceRequestArgs {
  acks: number;
  timeout: number;
  compression?: number;
  transactionalId?: string | null;
  /** kafkajs's Long (or anything its `Long.fromValue` takes). */
  producerId?: unknown;
  producerEpoch?: number;
  topicData: { topic: string; partitions: PartitionData[] }[];
}
interface KafkajsEncoder {
  buf: Buffer;
  offset: number;
}
interface LongLike {
  getHighBits(): number;
  getLowBits(): number;
}
interface Kafkajs {
  Encoder: new (initialSize?: number) => KafkajsEncoder;
  fromValue: (value: unknown) => LongLike;
  crc32c: (data: Buffer) => number;
}
type Built = { request: { encode: () => Promise<unknown> }; response: unknown };
type VersionFn = ((args: ProduceRequestArgs) => Built) & { [WRAPPED]?: true };
type Protocol = ((opts: { version: number }) => VersionFn) & { [WRAPPED]?: true };

let kafkajs: Kafkajs | undefined;

/** kafkajs's own Encoder and Long (the request must be the Encoder kafkajs's framing expects). */
function loadKafkajs(): Kafkajs {
  if (kafkajs) return kafkajs;
  const Encoder = kafkajsModule<Kafkajs["Encoder"]>("protocol", "encoder.js");
  const Long = kafkajsModule<{ fromValue: Kafkajs["fromValue"] }>("utils", "long.js");
  kafkajs = { Encoder, fromValue: (value) => Long.fromValue(value), crc32c: loadCrc32c() };
  return kafkajs;
}

/**
 * The native CRC-32C of `@node-rs/crc32`; on a platform without its prebuilt binary, kafkajs's own
 * JavaScript one (the same checksum, only slower), so a missing binary never stops a producer.
 */
function loadCrc32c(): Kafkajs["crc32c"] {
  try {
    const { crc32c } = createRequire(import.meta.url)("@node-rs/crc32") as {
      crc32c: (data: Uint8Array) => number;
    };
    return (data) => crc32c(data);
  } catch {
    return kafkajsModule<Kafkajs["crc32c"]>("protocol", "recordBatch", "crc32C", "index.js");
  }
}

/** Wraps kafkajs's Produce protocol lookup so versions 3–7 encode with `encodeProduceRequest`. */
export function fixProduceEncoding(): void {
  const mod = kafkajsModule<{ protocol: Protocol }>("protocol", "requests", "produce", "index.js");
  const original = mod.protocol;
  if (original[WRAPPED]) return;
  const lib = loadKafkajs();
  const wrapped: Protocol = ({ version }) => {
    const build = original({ version });
    if (version < 3) return build;
    return (args) => {
      const built = build(args);
      if ((args.compression ?? NONE) === NONE) {
        built.request.encode = async () =>
          withFrameRoom(new lib.Encoder(0), encodeWithRoom(args, Date.now(), FRAME_ROOM), FRAME_ROOM);
      }
      return built;
    };
  };
  wrapped[WRAPPED] = true;
  mod.protocol = wrapped;
  frameRequestsInPlace();
}

/**
 * The body of a Produce request v3–v7 without compression, byte for byte what kafkajs writes
 * (`requests/produce/v3/request.js`, `recordBatch/v0`, `recordBatch/record/v0`, `recordBatch/header/v0`).
 * `nowMs` stands in for kafkajs's `Date.now()` (messages without a timestamp). Pure but for the clock.
 */
export function encodeProduceRequest(args: ProduceRequestArgs, nowMs: number): Buffer {
  return encodeWithRoom(args, nowMs, 0);
}

/** `encodeProduceRequest` into a buffer with `room` free bytes before the body (see request-framing.ts). */
function encodeWithRoom(args: ProduceRequestArgs, nowMs: number, room: number): Buffer {
  const lib = loadKafkajs();
  const topics = args.topicData.map((t) => ({
    name: Buffer.from(t.topic, "utf8"),
    partitions: t.partitions.map((p) => batchPlan(p, nowMs)),
  }));
  const txId = args.transactionalId == null ? null : Buffer.from(args.transactionalId, "utf8");
  let size = 2 + (txId?.length ?? 0) + 2 + 4 + 4;
  for (const t of topics) {
    size += 2 + t.name.length + 4;
    for (const p of t.partitions) size += 4 + 4 + 8 + 4 + p.batchLength;
  }
  const out = Buffer.allocUnsafe(room + size);
  let o = out.writeInt16BE(txId === null ? -1 : txId.length, room);
  if (txId) o += txId.copy(out, o);
  o = out.writeInt16BE(args.acks, o);
  o = out.writeInt32BE(args.timeout, o);
  o = out.writeInt32BE(topics.length, o);
  const producerId = lib.fromValue(args.producerId ?? -1);
  const firstOffset = lib.fromValue(0);
  const transactional = args.transactionalId ? TRANSACTIONAL_MASK : 0;
  for (const t of topics) {
    o = out.writeInt16BE(t.name.length, o);
    o += t.name.copy(out, o);
    o = out.writeInt32BE(t.partitions.length, o);
    for (const p of t.partitions) {
      o = out.writeInt32BE(p.partition, o);
      o = out.writeInt32BE(8 + 4 + p.batchLength, o); // the record set: firstOffset, length, batch
      o = writeLong(out, o, firstOffset);
      o = out.writeInt32BE(p.batchLength, o);
      o = out.writeInt32BE(0, o); // partitionLeaderEpoch
      o = out.writeInt8(MAGIC, o);
      const crcAt = o;
      o += 4;
      const bodyStart = o;
      o = out.writeInt16BE(transactional, o); // attributes: no compression, create time
      o = out.writeInt32BE(p.messages.length - 1, o); // lastOffsetDelta
      o = writeLong(out, o, lib.fromValue(p.firstTimestamp));
      o = writeLong(out, o, lib.fromValue(p.maxTimestamp));
      o = writeLong(out, o, producerId);
      o = out.writeInt16BE(args.producerEpoch ?? 0, o);
      o = out.writeInt32BE(p.firstSequence, o);
      o = out.writeInt32BE(p.messages.length, o);
      o = writeRecords(out, o, p);
      out.writeUInt32BE(lib.crc32c(out.subarray(bodyStart, o)), crcAt);
    }
  }
  if (o !== room + size)
    throw new Error(`encodeProduceRequest: wrote ${o - room} bytes of ${size} (a bug in Sluice)`);
  return out;
}

interface BatchPlan {
  partition: number;
  firstSequence: number;
  firstTimestamp: string | number;
  maxTimestamp: string | number;
  messages: ProduceMessage[];
  /**
   * Per record, in write order, numbers only (no object per record or field): its body size, its
   * timestamp delta, the key's and the value's byte length (-1 for null), its header count, then
   * each header value's byte length. Strings are measured once here and written in place later.
   */
  sizes: number[];
  /** From partitionLeaderEpoch to the last record's end (what the batch's length field counts). */
  batchLength: number;
}

function batchPlan(p: PartitionData, nowMs: number): BatchPlan {
  // kafkajs sorts the timestamps as strings (Array#sort without a comparator) and takes the ends.
  const stamps = p.messages
    .map((m) => m.timestamp)
    .filter((t): t is string | number => t != null)
    .sort();
  const firstTimestamp = stamps.length === 0 ? nowMs : (stamps[0] as string | number);
  const maxTimestamp = stamps.length === 0 ? nowMs : (stamps[stamps.length - 1] as string | number);
  const first = Number(firstTimestamp);
  let recordsSize = 0;
  const sizes: number[] = [];
  const messages = p.messages;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceMessage;
    const at = sizes.length;
    const timestampDelta = Number(m.timestamp || nowMs) - first;
    sizes.push(0, timestampDelta);
    let bodySize = 1 + sizeOfVarLong(timestampDelta) + sizeOfVarInt(i);
    bodySize += fieldSize(sizes, m.key);
    bodySize += fieldSize(sizes, m.value);
    const countAt = sizes.length;
    sizes.push(0);
    let count = 0;
    const named = m.headers;
    // for…in with an own-property check walks what kafkajs's Object.keys does, without its array.
    for (const name in named) {
      if (!Object.hasOwn(named, name)) continue;
      const v = named[name];
      const nameLength = headerName(name).length;
      if (Array.isArray(v)) {
        for (const one of v) {
          bodySize += sizeOfVarInt(nameLength) + nameLength + headerValueSize(sizes, one);
          count++;
        }
      } else {
        bodySize += sizeOfVarInt(nameLength) + nameLength + headerValueSize(sizes, v);
        count++;
      }
    }
    sizes[countAt] = count;
    bodySize += sizeOfVarInt(count);
    sizes[at] = bodySize;
    recordsSize += sizeOfVarInt(bodySize) + bodySize;
  }
  const bodySize = 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4 + recordsSize;
  return {
    partition: p.partition,
    firstSequence: p.firstSequence ?? 0,
    firstTimestamp,
    maxTimestamp,
    messages,
    sizes,
    batchLength: 4 + 1 + 4 + bodySize,
  };
}

/** Writes the batch's records from `plan.sizes` (see BatchPlan), in the order `batchPlan` measured them. */
function writeRecords(out: Buffer, at: number, plan: BatchPlan): number {
  const { messages, sizes } = plan;
  let o = at;
  let k = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceMessage;
    o = writeVarInt(out, o, sizes[k++] as number);
    out[o++] = 0; // attributes
    o = writeVarLong(out, o, sizes[k++] as number);
    o = writeVarInt(out, o, i); // offsetDelta
    o = writeField(out, o, m.key, sizes[k++] as number);
    o = writeField(out, o, m.value, sizes[k++] as number);
    o = writeVarInt(out, o, sizes[k++] as number);
    const named = m.headers;
    for (const name in named) {
      if (!Object.hasOwn(named, name)) continue;
      const v = named[name];
      const encoded = headerName(name);
      if (Array.isArray(v)) {
        for (const one of v) {
          o = writeField(out, writeBytes(out, o, encoded), one, sizes[k++] as number);
        }
      } else {
        o = writeField(out, writeBytes(out, o, encoded), v, sizes[k++] as number);
      }
    }
  }
  return o;
}

/**
 * What kafkajs writes for a key or value: a Buffer as is, anything else but null as `String(v)` in
 * UTF-8. Pushes its byte length (-1 for null) onto `sizes` and returns its size in the record.
 */
function fieldSize(sizes: number[], v: Bytes): number {
  if (v == null) {
    sizes.push(-1);
    return 1;
  }
  const length = Buffer.isBuffer(v) ? v.length : Buffer.byteLength(String(v), "utf8");
  sizes.push(length);
  return sizeOfVarInt(length) + length;
}

function headerValueSize(sizes: number[], v: Buffer | string | undefined): number {
  // kafkajs sizes a header with Buffer.byteLength(value), which throws for undefined or null.
  if (v == null) throw new TypeError(`header value must be a string or a Buffer, got ${String(v)}`);
  return fieldSize(sizes, v);
}

/** A key, value or header value of `length` bytes (-1: null), straight into the request. */
function writeField(out: Buffer, at: number, v: Bytes, length: number): number {
  if (length === -1) return writeVarInt(out, at, -1);
  const o = writeVarInt(out, at, length);
  if (Buffer.isBuffer(v)) return o + v.copy(out, o);
  return o + out.write(String(v), o, length, "utf8");
}

function writeBytes(out: Buffer, at: number, v: Buffer): number {
  const o = writeVarInt(out, at, v.length);
  return o + v.copy(out, o);
}

/** Header names repeat on every record (content-type, run id, trace context): encoded once each. */
const headerNames = new Map<string, Buffer>();
const HEADER_NAMES_KEPT = 256;

function headerName(name: string): Buffer {
  let encoded = headerNames.get(name);
  if (encoded === undefined) {
    encoded = Buffer.from(name, "utf8");
    if (headerNames.size < HEADER_NAMES_KEPT) headerNames.set(name, encoded);
  }
  return encoded;
}

function writeLong(out: Buffer, at: number, v: LongLike): number {
  out.writeInt32BE(v.getHighBits(), at);
  out.writeInt32BE(v.getLowBits(), at + 4);
  return at + 8;
}

/** Zig-zag varint of a 32-bit integer (kafkajs `writeVarInt`). */
function writeVarInt(out: Buffer, at: number, value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  let o = at;
  while (v >= 0x80) {
    out[o++] = (v & 0x7f) | 0x80;
    v >>>= 7;
  }
  out[o++] = v;
  return o;
}

function sizeOfVarInt(value: number): number {
  let v = ((value << 1) ^ (value >> 31)) >>> 0;
  let n = 1;
  while (v >= 0x80) {
    n++;
    v >>>= 7;
  }
  return n;
}

/** Zig-zag varint of a 64-bit integer (kafkajs `writeVarLong`), exact for |value| < 2^52. */
function writeVarLong(out: Buffer, at: number, value: number): number {
  let v = zigZag64(value);
  let o = at;
  while (v >= 0x80) {
    out[o++] = (v % 0x80) | 0x80;
    v = Math.floor(v / 0x80);
  }
  out[o++] = v;
  return o;
}

function sizeOfVarLong(value: number): number {
  let v = zigZag64(value);
  let n = 1;
  while (v >= 0x80) {
    n++;
    v = Math.floor(v / 0x80);
  }
  return n;
}

function zigZag64(value: number): number {
  if (!Number.isSafeInteger(value) || Math.abs(value) >= 2 ** 52) {
    throw new RangeError(`record timestamp delta out of range: ${String(value)} ms`);
  }
  return value >= 0 ? value * 2 : -value * 2 - 1;
}
