import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  encodeProduceRequest,
  fixProduceEncoding,
  type ProduceRequestArgs,
} from "../../../../src/kafka/protocol/produce-encoding.js";
import { picker, seededRandom } from "../../../support/seeded-random.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("kafkajs")), "src");
type Encoded = { buffer: Buffer };
type Request = (args: ProduceRequestArgs) => { encode: () => Promise<Encoded> };
/** kafkajs's own Produce v3 request module (v4–v7 reuse its encoder): the reference bytes. */
const kafkajsV3 = require(join(root, "protocol", "requests", "produce", "v3", "request.js")) as Request;
const produce = require(join(root, "protocol", "requests", "produce", "index.js")) as {
  protocol: (opts: {
    version: number;
  }) => (args: ProduceRequestArgs) => { request: { encode: () => Promise<Encoded> } };
};
const Long = require(join(root, "utils", "long.js")) as { fromValue: (v: unknown) => unknown };

function generated(seed: number, now: number): ProduceRequestArgs {
  const r = seededRandom(seed);
  const pick = picker(r);
  const text = (n: number) => Array.from({ length: n }, () => pick(["a", "é", "z", " ", "€", "0"])).join("");
  const bytes = () =>
    pick([
      () => null,
      () => Buffer.from(text(Math.floor(r() * 40))),
      () => text(Math.floor(r() * 40)),
      () => Buffer.alloc(Math.floor(r() * 20_000), 7), // multi-byte length varints
      () => "",
    ])();
  const header = () => pick([() => "v", () => Buffer.from([0, 255]), () => text(5)])();
  const stamp = () =>
    pick([() => undefined, () => String(now - Math.floor(r() * 5000)), () => now + Math.floor(r() * 99)])();
  return {
    acks: pick([-1, 1]),
    timeout: 30_000,
    transactionalId: pick([null, "sluice-tx-é-1", undefined]),
    producerId: Long.fromValue(pick([-1, 5, 2 ** 40 + 3])),
    producerEpoch: Math.floor(r() * 3),
    topicData: Array.from({ length: 1 + Math.floor(r() * 3) }, (_, t) => ({
      topic: `results-${t}-é`,
      partitions: Array.from({ length: 1 + Math.floor(r() * 3) }, (_, p) => ({
        partition: p,
        firstSequence: Math.floor(r() * 1000),
        messages: Array.from({ length: Math.floor(r() * 150) }, () => ({
          key: bytes(),
          value: bytes(),
          headers: pick([
            () => ({}),
            () => ({ "content-type": "application/json" }),
            () => ({ traceparent: header(), multi: [header(), header()] }),
          ])(),
          timestamp: stamp(),
        })),
      })),
    })),
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("encodeProduceRequest", () => {
  it("writes kafkajs's Produce bytes exactly, on 100 generated requests", async () => {
    const now = 1_733_300_000_000;
    vi.spyOn(Date, "now").mockReturnValue(now); // kafkajs stamps untimed messages with Date.now()
    for (let seed = 1; seed <= 100; seed++) {
      const args = generated(seed, now);
      const expected = (await kafkajsV3(args).encode()).buffer;
      expect(encodeProduceRequest(args, now).equals(expected), `seed ${seed}`).toBe(true);
    }
  });

  it("an empty partition, a null transactional id and kafkajs's string sort of timestamps", async () => {
    const now = 1_000;
    vi.spyOn(Date, "now").mockReturnValue(now);
    const args: ProduceRequestArgs = {
      acks: -1,
      timeout: 100,
      transactionalId: null,
      topicData: [
        {
          topic: "t",
          partitions: [
            { partition: 0, messages: [] },
            // "1000" sorts before "999": kafkajs's first timestamp is "1000" and the other delta is -1.
            {
              partition: 1,
              messages: [
                { value: "a", timestamp: "999" },
                { value: "b", timestamp: "1000" },
              ],
            },
          ],
        },
      ],
    };
    expect(encodeProduceRequest(args, now).equals((await kafkajsV3(args).encode()).buffer)).toBe(true);
  });

  it("refuses a header without a value, as kafkajs does, instead of writing a wrong record", () => {
    const args: ProduceRequestArgs = {
      acks: -1,
      timeout: 100,
      topicData: [
        { topic: "t", partitions: [{ partition: 0, messages: [{ value: "a", headers: { h: undefined } }] }] },
      ],
    };
    expect(() => encodeProduceRequest(args, 0)).toThrow(/header value/);
  });
});

describe("the CRC-32C", () => {
  it("the native one and kafkajs's JavaScript one (the fallback) agree", () => {
    const kafkajsCrc = require(join(root, "protocol", "recordBatch", "crc32C", "index.js")) as (
      b: Buffer,
    ) => number;
    const { crc32c } = require("@node-rs/crc32") as { crc32c: (b: Uint8Array) => number };
    const r = seededRandom(99);
    for (const size of [0, 1, 7, 8, 63, 64, 1000, 65_537]) {
      const data = Buffer.from(Array.from({ length: size }, () => Math.floor(r() * 256)));
      expect(crc32c(data), `size ${size}`).toBe(kafkajsCrc(data));
    }
  });
});

describe("fixProduceEncoding", () => {
  it("replaces encode for v3–v7 without compression; v2 and compressed requests keep kafkajs's", async () => {
    const now = 1_733_300_000_000;
    vi.spyOn(Date, "now").mockReturnValue(now);
    const args = generated(7, now);
    const reference = (await kafkajsV3(args).encode()).buffer;
    const kafkajsV2 = produce.protocol({ version: 2 })(args).request.encode;
    fixProduceEncoding();
    fixProduceEncoding(); // idempotent
    for (const version of [3, 4, 5, 6, 7]) {
      const { request } = produce.protocol({ version })(args);
      expect(request.encode.toString()).toContain("encodeWithRoom");
      expect((await request.encode()).buffer.equals(reference), `v${version}`).toBe(true);
    }
    expect(produce.protocol({ version: 2 })(args).request.encode.toString()).toBe(kafkajsV2.toString());
    const gzip = produce.protocol({ version: 7 })({ ...args, compression: 1 }).request.encode;
    expect(gzip.toString()).not.toContain("encodeWithRoom");
  });
});
