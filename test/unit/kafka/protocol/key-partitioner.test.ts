import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { keyPartitioner, murmur2 } from "../../../../src/kafka/protocol/key-partitioner.js";
import { seededRandom } from "../../../support/seeded-random.js";

const require = createRequire(import.meta.url);
const root = join(dirname(require.resolve("kafkajs")), "src", "producer", "partitioners");
const kafkajsMurmur2 = require(join(root, "default", "murmur2.js")) as (key: unknown) => number;
const { DefaultPartitioner } = require(join(root, "index.js")) as {
  DefaultPartitioner: () => (args: unknown) => number;
};

function keys(seed: number, n: number): Array<string | Buffer | number> {
  const r = seededRandom(seed);
  const chars = ["a", "Z", "0", "-", " ", "é", "€", "日", "😀", "\u0000", "\u007f"];
  return Array.from({ length: n }, (_, i) => {
    const length = Math.floor(r() * 40);
    const text = Array.from({ length }, () => chars[Math.floor(r() * chars.length)]).join("");
    if (i % 5 === 0) return Buffer.from(Array.from({ length }, () => Math.floor(r() * 256)));
    if (i % 11 === 0) return Math.floor(r() * 1e9);
    return text;
  });
}

describe("murmur2", () => {
  it("hashes every key exactly as kafkajs's Java-compatible murmur2 does", () => {
    for (const key of [
      ...keys(1, 3000),
      "",
      "a",
      "ab",
      "abc",
      "abcd",
      "abcde",
      "4f6c0c1a-8d2e-4a51-9d0e-1c2b3a4d5e6f",
    ]) {
      expect(murmur2(key), JSON.stringify(key)).toBe(kafkajsMurmur2(key));
    }
  });
});

describe("keyPartitioner", () => {
  it("picks kafkajs's DefaultPartitioner's partition for explicit partitions and keys", () => {
    const ours = keyPartitioner();
    const theirs = DefaultPartitioner();
    for (const partitions of [1, 3, 12]) {
      const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({
        partitionId,
        leader: 1,
      }));
      for (const [i, key] of keys(partitions, 500).entries()) {
        const message = i % 7 === 0 ? { key, partition: i % partitions } : { key };
        const args = { topic: "results", partitionMetadata, message };
        expect(ours(args)).toBe(theirs(args));
      }
    }
  });

  it("spreads keyless messages round robin over the partitions with a leader", () => {
    const ours = keyPartitioner();
    const partitionMetadata = [
      { partitionId: 0, leader: 1 },
      { partitionId: 1, leader: -1 },
      { partitionId: 2, leader: 1 },
    ];
    const picked = Array.from({ length: 6 }, () =>
      ours({ topic: "t", partitionMetadata, message: { key: null } }),
    );
    expect(new Set(picked)).toEqual(new Set([0, 2]));
    expect(picked[0]).not.toBe(picked[1]);
    const none = partitionMetadata.map((p) => ({ ...p, leader: -1 }));
    const fallback = ours({ topic: "t", partitionMetadata: none, message: {} });
    expect([0, 1, 2]).toContain(fallback);
  });
});
