import { createRequire } from "node:module";
import { kafkajsModulePath } from "./kafkajs-module.js";

/**
 * kafkajs 2.2.4's `producer/groupMessagesPerPartition.js`, in linear time.
 *
 * Why: kafkajs groups the messages of every send by partition with
 * `Object.assign(result, { [partition]: [...current, message] })`, which copies the partition's
 * array for every message: quadratic in the messages per partition, and an array of that length
 * allocated for each one. Sluice's transactional sends carry up to 512 KiB (some 450 results and
 * as many changelog entries per partition), where that grouping cost ~1 µs per message and was
 * 6.5 % of the main thread at the Kafka-path ceiling (BENCHMARKS.md, "The Kafka path at steady
 * state"). This version pushes onto one array per partition: the same object (partitions as keys,
 * messages in send order), the partitioner called once per message in the same order.
 *
 * Where: kafkajs's `sendMessages.js` binds the function when it is first required, so the
 * replacement must be in Node's module cache before kafkajs loads. This module installs it when
 * it is evaluated; every Sluice module that loads kafkajs imports it first (a side-effect import
 * above the `kafkajs` import). `linearGroupingInstalled()` says whether that worked.
 */

type Partitioner = (args: { topic: string; partitionMetadata: unknown[]; message: unknown }) => number;
interface GroupArgs {
  topic: string;
  partitionMetadata: unknown[];
  messages: unknown[];
  partitioner: Partitioner;
}

/** Messages by partition, each partition's in send order; `{}` when the topic has no partitions. */
export function groupMessagesPerPartition({
  topic,
  partitionMetadata,
  messages,
  partitioner,
}: GroupArgs): Record<string, unknown[]> {
  const grouped: Record<string, unknown[]> = {};
  if (partitionMetadata.length === 0) return grouped;
  for (const message of messages) {
    const partition = partitioner({ topic, partitionMetadata, message });
    const current = grouped[partition];
    if (current === undefined) grouped[partition] = [message];
    else current.push(message);
  }
  return grouped;
}

const require = createRequire(import.meta.url);
const GROUPING_FILE = kafkajsModulePath("producer", "groupMessagesPerPartition.js");

/** Puts `groupMessagesPerPartition` into Node's module cache in kafkajs's place, unless kafkajs loaded it already. */
function install(): void {
  if (require.cache[GROUPING_FILE] !== undefined) return;
  const Module = require("node:module") as new (id: string) => NodeJS.Module;
  const entry = new Module(GROUPING_FILE);
  entry.filename = GROUPING_FILE;
  entry.loaded = true;
  entry.exports = groupMessagesPerPartition;
  require.cache[GROUPING_FILE] = entry;
}

/** Whether kafkajs's producers in this process group with the linear version. */
export function linearGroupingInstalled(): boolean {
  return require.cache[GROUPING_FILE]?.exports === groupMessagesPerPartition;
}

install();
