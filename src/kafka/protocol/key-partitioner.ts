import { randomBytes } from "node:crypto";

/**
 * kafkajs 2.2.4's `DefaultPartitioner` (the Java client's: murmur2 of the key, else round robin),
 * without its per-message garbage.
 *
 * Why: Sluice's results are keyed by request id, so every result is hashed. kafkajs's murmur2 does
 * 64-bit `Long` arithmetic, allocating some five Long objects per 4 bytes of key (45 for a 36-character
 * id), and copies a string key into a new Buffer; its partitioner also filters the partition list
 * into a new array for every message, even one whose partition is set. At the Kafka-path ceiling
 * that was ~2.4 % of the main thread and ~400 bytes of garbage per result.
 *
 * What: the same partition for every message. murmur2 is computed in 32-bit integer arithmetic
 * (`Math.imul`, which is exactly the low 32 bits kafkajs keeps), reading an ASCII string key's
 * bytes in place (other strings are UTF-8-encoded first, as kafkajs does). The partition rule is
 * kafkajs's: an explicit `partition`, else `toPositive(murmur2(key)) % partitions` for a keyed
 * message, else a per-topic round robin over the partitions with a leader (starting at a random
 * counter), else over all of them. The unit test compares it with kafkajs's on generated messages.
 */
export function murmur2(key: Buffer | string | number): number {
  if (typeof key === "number") key = String(key);
  if (typeof key === "string" && !isAscii(key)) key = Buffer.from(key, "utf8");
  const length = key.length;
  const byteAt: (i: number) => number =
    typeof key === "string" ? (i) => (key as string).charCodeAt(i) : (i) => (key as Buffer)[i] as number;
  const m = 0x5bd1e995;
  let h = 0x9747b28c ^ length;
  const length4 = length >>> 2;
  for (let i = 0; i < length4; i++) {
    const i4 = i * 4;
    let k = byteAt(i4) | (byteAt(i4 + 1) << 8) | (byteAt(i4 + 2) << 16) | (byteAt(i4 + 3) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const tail = length & ~3;
  const rest = length & 3; // the tail mixes of murmur2's fall-through switch
  if (rest === 3) h ^= byteAt(tail + 2) << 16;
  if (rest >= 2) h ^= byteAt(tail + 1) << 8;
  if (rest >= 1) {
    h ^= byteAt(tail);
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}

function isAscii(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return false;
  return true;
}

const toPositive = (x: number) => x & 0x7fffffff;

interface PartitionMetadata {
  partitionId: number;
  leader: number;
}
interface PartitionerArgs {
  topic: string;
  partitionMetadata: PartitionMetadata[];
  message: { partition?: number | null; key?: Buffer | string | number | null };
}

/** A kafkajs `createPartitioner`: `kafka.producer({ createPartitioner: keyPartitioner })`. */
export function keyPartitioner(): (args: PartitionerArgs) => number {
  const counters = new Map<string, number>();
  return ({ topic, partitionMetadata, message }) => {
    if (!counters.has(topic)) counters.set(topic, randomBytes(4).readUInt32BE(0));
    if (message.partition !== null && message.partition !== undefined) return message.partition;
    const partitions = partitionMetadata.length;
    if (message.key !== null && message.key !== undefined)
      return toPositive(murmur2(message.key)) % partitions;
    const counter = (counters.get(topic) as number) + 1;
    counters.set(topic, counter);
    const available = partitionMetadata.filter((p) => p.leader >= 0);
    if (available.length > 0)
      return (available[toPositive(counter) % available.length] as PartitionMetadata).partitionId;
    return toPositive(counter) % partitions;
  };
}
