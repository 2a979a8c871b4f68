import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  FRAME_ROOM,
  type FramingEncoder,
  frameRequestsInPlace,
  withFrameRoom,
} from "../../../../src/kafka/protocol/request-framing.js";
import { seededRandom } from "../../../support/seeded-random.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("kafkajs")), "src");
type KafkajsEncoder = FramingEncoder & { buffer: Buffer; writeInt32(v: number): KafkajsEncoder };
const Encoder = require(join(root, "protocol", "encoder.js")) as new (size?: number) => KafkajsEncoder;
/** kafkajs's framing of every request: header, then size, each appended with writeEncoder. */
const frame = require(join(root, "protocol", "request.js")) as (args: {
  correlationId: number;
  clientId: string;
  request: { apiKey: number; apiVersion: number; encode: () => Promise<KafkajsEncoder> };
}) => Promise<KafkajsEncoder>;

function body(seed: number, size: number): Buffer {
  const r = seededRandom(seed);
  return Buffer.from(Array.from({ length: size }, () => Math.floor(r() * 256)));
}

/** The body as a plain kafkajs Encoder, and as one with room before it in a larger allocation. */
function encoders(bytes: Buffer): { plain: () => KafkajsEncoder; roomy: () => KafkajsEncoder } {
  return {
    plain: () => {
      const e = new Encoder(0);
      e.buf = Buffer.from(bytes);
      e.offset = bytes.length;
      return e;
    },
    roomy: () => {
      const whole = Buffer.alloc(FRAME_ROOM + bytes.length, 0xee);
      bytes.copy(whole, FRAME_ROOM);
      return withFrameRoom(new Encoder(0), whole, FRAME_ROOM);
    },
  };
}

const request = (encode: () => KafkajsEncoder) => ({
  apiKey: 0,
  apiVersion: 7,
  encode: async () => encode(),
});

describe("frameRequestsInPlace", () => {
  frameRequestsInPlace();
  frameRequestsInPlace(); // idempotent

  it("frames a body with room before it as kafkajs does, byte for byte, without copying the body", async () => {
    for (const [seed, size, clientId] of [
      [1, 0, "sluice"],
      [2, 37, "sluice-é-1"],
      [3, 70_000, "c".repeat(FRAME_ROOM - 14)], // the longest client id that fits
      [4, 1_048_600, "sluice-model-control"],
    ] as const) {
      const { plain, roomy } = encoders(body(seed, size));
      const expected = (await frame({ correlationId: seed * 1000, clientId, request: request(plain) }))
        .buffer;
      const roomyBody = roomy();
      const framed = await frame({ correlationId: seed * 1000, clientId, request: request(() => roomyBody) });
      expect(framed.buffer.equals(expected), `seed ${seed}`).toBe(true);
      // The frame is a view of the body's own allocation: nothing was copied or allocated for it.
      expect(framed.buf.buffer).toBe(roomyBody.buf.buffer);
    }
  });

  it("falls back to kafkajs's copy when the header does not fit the room or the body grew elsewhere", async () => {
    const bytes = body(5, 900);
    const { plain, roomy } = encoders(bytes);
    const longId = "x".repeat(FRAME_ROOM);
    const expected = (await frame({ correlationId: 7, clientId: longId, request: request(plain) })).buffer;
    const framed = await frame({ correlationId: 7, clientId: longId, request: request(roomy) });
    expect(framed.buffer.equals(expected)).toBe(true);

    // An encoder with room that then grew (reallocated) is appended by copying what it holds now.
    const grown = roomy().writeInt32(42);
    const reference = plain().writeInt32(42);
    const a = await frame({ correlationId: 8, clientId: "sluice", request: request(() => grown) });
    const b = await frame({ correlationId: 8, clientId: "sluice", request: request(() => reference) });
    expect(a.buffer.equals(b.buffer)).toBe(true);
  });

  it("kafkajs's own requests (no room) frame exactly as before", async () => {
    const { plain } = encoders(body(6, 5000));
    const framed = await frame({ correlationId: 9, clientId: "sluice", request: request(plain) });
    const size = framed.buffer.readInt32BE(0);
    expect(size).toBe(framed.buffer.length - 4);
    expect(framed.buffer.subarray(framed.buffer.length - 5000).equals(body(6, 5000))).toBe(true);
  });
});
