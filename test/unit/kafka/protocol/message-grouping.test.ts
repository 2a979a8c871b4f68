import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { groupMessagesPerPartition } from "../../../../src/kafka/protocol/message-grouping.js";

const require = createRequire(import.meta.url);
const file = join(dirname(require.resolve("kafkajs")), "src", "producer", "groupMessagesPerPartition.js");

/** kafkajs's own grouping, compiled from its file (the module cache may hold the linear one). */
function kafkajsGrouping(): typeof groupMessagesPerPartition {
  const module = { exports: {} as unknown };
  new Function("module", "exports", "require", readFileSync(file, "utf8"))(module, module.exports, require);
  return module.exports as typeof groupMessagesPerPartition;
}

/** kafkajs's default partitioner rule in miniature: an explicit partition, else round robin. */
function roundRobin(): (args: { partitionMetadata: unknown[]; message: unknown }) => number {
  let next = 0;
  return ({ partitionMetadata, message }) => {
    const partition = (message as { partition?: number }).partition;
    return partition ?? next++ % partitionMetadata.length;
  };
}

describe("groupMessagesPerPartition (linear)", () => {
  it("groups exactly as kafkajs does: the same partitions, messages in send order, one partitioner call each", () => {
    const original = kafkajsGrouping();
    for (const [count, partitions] of [
      [0, 3],
      [1, 1],
      [7, 3],
      [500, 3],
      [901, 12],
    ] as const) {
      const partitionMetadata = Array.from({ length: partitions }, (_, partitionId) => ({ partitionId }));
      const messages = Array.from({ length: count }, (_, i) => ({
        value: `m${i}`,
        ...(i % 3 === 0 ? {} : { partition: (i * 7) % partitions }),
      }));
      const calls: unknown[] = [];
      const counted =
        (p: ReturnType<typeof roundRobin>) => (args: { partitionMetadata: unknown[]; message: unknown }) => {
          calls.push(args.message);
          return p(args);
        };
      const expected = original({ topic: "t", partitionMetadata, messages, partitioner: roundRobin() });
      const linear = groupMessagesPerPartition({
        topic: "t",
        partitionMetadata,
        messages,
        partitioner: counted(roundRobin()),
      });
      expect(linear).toEqual(expected);
      expect(Object.keys(linear)).toEqual(Object.keys(expected));
      expect(calls).toEqual(messages);
    }
  });

  it("returns no groups for a topic without partition metadata", () => {
    const partitioner = () => {
      throw new Error("not called");
    };
    expect(
      groupMessagesPerPartition({ topic: "t", partitionMetadata: [], messages: [{}], partitioner }),
    ).toEqual({});
  });

  it("is the grouping kafkajs's producers use once Sluice's Kafka client is loaded (a fresh process)", () => {
    const script = `
      await import(${JSON.stringify(new URL("../../../../src/kafka/client/kafka-client.ts", import.meta.url).href)});
      const grouping = await import(${JSON.stringify(new URL("../../../../src/kafka/protocol/message-grouping.ts", import.meta.url).href)});
      process.stdout.write(String(grouping.linearGroupingInstalled()));
    `;
    const out = execFileSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
    });
    expect(out).toBe("true");
  });
});
