import type { Kafka } from "kafkajs";
import { ensureTopics } from "../../src/kafka/client/topic-admin.js";
import { RunManifestStore } from "../../src/kafka/runs/run-manifest-store.js";
import { type ProcessorLayout, processorLayout } from "./processor-layout.js";

/**
 * A processor layout with both lanes, created on the broker: one online topic, `<base>.backfill`,
 * and the runs topic `<base>.runs` that backfill transactions write their cost shares to
 * (docs/observability.md, "Cost"). One partition per topic.
 */
export async function lanesLayout(
  kafka: Kafka,
  base: string,
): Promise<{ topics: ProcessorLayout; online: string; backfill: string; runsTopic: string }> {
  const topics = processorLayout(base, { partitions: 1 });
  const online = topics.requests[0] as string;
  const backfill = `${base}.backfill`;
  await ensureTopics(kafka, { ...topics, requests: [online, backfill] });
  const runsTopic = `${base}.runs`;
  await new RunManifestStore({ kafka, topic: runsTopic, replicationFactor: 1 }).ensureTopic();
  return { topics, online, backfill, runsTopic };
}
