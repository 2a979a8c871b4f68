import { kafkajsModule } from "./kafkajs-module.js";

/**
 * Frames a large request (Sluice's produce requests) in place, where kafkajs 2.2.4 would copy it
 * twice.
 *
 * Why: kafkajs frames every request in `src/protocol/request.js` by writing the header (api key,
 * version, correlation id, client id) into a fresh `Encoder` and appending the body with
 * `writeEncoder`, then writing the size into another fresh `Encoder` and appending that. Each append
 * allocates a zero-filled buffer of the next power of two and copies everything into it: a 400 KB
 * produce request is allocated and copied twice more after it was encoded. At the Kafka-path ceiling
 * with 1.1 KB results that was ~6 % of the main thread's busy time (BENCHMARKS.md, "Produce requests
 * framed in place").
 *
 * How: a body built by `withFrameRoom` leaves `FRAME_ROOM` free bytes in front of it, in the same
 * allocation. kafkajs's `Encoder#writeEncoder` is wrapped: appending such a body to an encoder that
 * holds only what fits in the room (the header, then the size) writes those bytes into the room just
 * before the body and makes the encoder a view of header + body, with no allocation or copy of the
 * body. Any other append (kafkajs's own requests, a client id longer than the room, an encoder with
 * more in it) runs kafkajs's `writeEncoder` unchanged. The bytes sent are kafkajs's, byte for byte
 * (the unit test frames requests both ways and compares).
 *
 * Where: `Encoder.prototype.writeEncoder` of the kafkajs every Sluice client uses, wrapped once per
 * process (a marker on the wrapped function), by `fixProduceEncoding`.
 */

/** Free bytes before a body: the size (4) and the header (10 + the client id's UTF-8 length). */
export const FRAME_ROOM = 256;

const ROOM = Symbol.for("sluice.kafkajs.frameRoom");
const WRAPPED = Symbol.for("sluice.kafkajs.requestFraming");

/** Where an encoder's bytes sit in a larger buffer with free bytes before them. */
interface Room {
  /** The whole allocation. */
  whole: Buffer;
  /** Where the encoder's bytes start in `whole`; the bytes before are free. */
  start: number;
}

/** kafkajs's Encoder, as far as framing touches it. */
export interface FramingEncoder {
  buf: Buffer;
  offset: number;
  [ROOM]?: Room;
}

type WriteEncoder = ((this: FramingEncoder, value: FramingEncoder) => FramingEncoder) & { [WRAPPED]?: true };

/**
 * Makes `encoder` hold `whole`'s bytes from `start` on, with the `start` bytes before them free for
 * the framing. `whole` is not copied.
 */
export function withFrameRoom<E extends FramingEncoder>(encoder: E, whole: Buffer, start: number): E {
  encoder.buf = whole.subarray(start);
  encoder.offset = encoder.buf.length;
  encoder[ROOM] = { whole, start };
  return encoder;
}

/** Wraps kafkajs's `Encoder#writeEncoder` so bodies with room before them are framed in place. */
export function frameRequestsInPlace(): void {
  const Encoder = kafkajsModule<{ prototype: { writeEncoder: WriteEncoder } }>("protocol", "encoder.js");
  const original = Encoder.prototype.writeEncoder;
  if (original[WRAPPED]) return;
  const wrapped: WriteEncoder = function (this: FramingEncoder, value: FramingEncoder) {
    const room = value?.[ROOM];
    if (room === undefined || this.offset > room.start || !stillViewOf(value, room)) {
      return original.call(this, value);
    }
    const start = room.start - this.offset;
    this.buf.copy(room.whole, start, 0, this.offset);
    const end = room.start + value.offset;
    this.buf = room.whole.subarray(start, end);
    this.offset = end - start;
    this[ROOM] = { whole: room.whole, start };
    return this;
  };
  wrapped[WRAPPED] = true;
  Encoder.prototype.writeEncoder = wrapped;
}

/** Whether the encoder still writes into the allocation it was given (it reallocates when it grows). */
function stillViewOf(encoder: FramingEncoder, room: Room): boolean {
  return (
    encoder.buf.buffer === room.whole.buffer &&
    encoder.buf.byteOffset === room.whole.byteOffset + room.start &&
    encoder.offset <= encoder.buf.length
  );
}
