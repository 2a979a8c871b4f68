import type { Kafka } from "kafkajs";
import { SluiceError } from "../sluice-error.js";

export interface TopicLayout {
  /** Request topics (created with `partitions` if missing; existing ones keep their count). */
  requests: readonly string[];
  results: string;
  deadLetters: string;
  /** Base name of the dedup changelog; one compacted topic per request topic (see changelogTopicFor). */
  dedupChangelog: string;
  freshness?: string;
  /** Partitions for topics Sluice creates. */
  partitions: number;
  replicationFactor: number;
}

/**
 * Changelog topic for a request topic. One changelog topic per request topic, so changelog
 * partition p always belongs to input partition p of that topic and to no other (a single
 * transactional producer per input partition is then the only writer of its changelog partition,
 * which is what makes the restore end offset stable). Adding a request topic later never moves
 * existing state, which a key-prefix scheme over a shared topic could not promise.
 */
export function changelogTopicFor(base: string, requestTopic: string): string {
  return `${base}.${requestTopic}`;
}

/**
 * Ensures every topic Sluice uses exists with the right partition count and cleanup policy.
 * Returns the partition count of each request topic. A changelog whose partition count differs
 * from its request topic is an error (the 1:1 mapping would be wrong), not silently "fixed".
 */
export async function ensureTopics(kafka: Kafka, layout: TopicLayout): Promise<Map<string, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const wanted = async (): Promise<Map<string, number>> => {
      const meta = await admin.fetchTopicMetadata({ topics: [] });
      return new Map(meta.topics.map((t) => [t.name, t.partitions.length]));
    };
    let existing = await wanted();
    const plain = [layout.results, layout.deadLetters, ...(layout.freshness ? [layout.freshness] : [])];
    const create = [...layout.requests, ...plain]
      .filter((t, i, all) => all.indexOf(t) === i && !existing.has(t))
      .map((topic) => ({
        topic,
        numPartitions: layout.partitions,
        replicationFactor: layout.replicationFactor,
      }));
    if (create.length > 0) await createIgnoringExisting(admin, create);
    existing = await wanted();

    const requestPartitions = new Map<string, number>();
    const changelogs: {
      topic: string;
      numPartitions: number;
      replicationFactor: number;
      configEntries: { name: string; value: string }[];
    }[] = [];
    for (const request of layout.requests) {
      const n = existing.get(request);
      if (n === undefined) throw new SluiceError("INTERNAL", `request topic ${request} was not created`);
      requestPartitions.set(request, n);
      const changelog = changelogTopicFor(layout.dedupChangelog, request);
      const have = existing.get(changelog);
      if (have === undefined) {
        changelogs.push({
          topic: changelog,
          numPartitions: n,
          replicationFactor: layout.replicationFactor,
          configEntries: [{ name: "cleanup.policy", value: "compact" }],
        });
      } else if (have !== n) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `dedup changelog ${changelog} has ${have} partitions but request topic ${request} has ${n}; they must match (partition p stores the ids of input partition p). Delete the changelog topic or give it ${n} partitions.`,
        );
      }
    }
    if (changelogs.length > 0) await createIgnoringExisting(admin, changelogs);
    return requestPartitions;
  } finally {
    await admin.disconnect();
  }
}

async function createIgnoringExisting(
  admin: ReturnType<Kafka["admin"]>,
  topics: Parameters<ReturnType<Kafka["admin"]>["createTopics"]>[0]["topics"],
): Promise<void> {
  try {
    await admin.createTopics({ topics, waitForLeaders: true });
  } catch (error) {
    // Another instance may have created them at the same time.
    const type = (error as { type?: string }).type;
    const nested = (error as { errors?: { type?: string }[] }).errors ?? [];
    if (type === "TOPIC_ALREADY_EXISTS" || nested.every((e) => e.type === "TOPIC_ALREADY_EXISTS")) {
      if (nested.length > 0 || type === "TOPIC_ALREADY_EXISTS") return;
    }
    throw new SluiceError("BROKER_UNAVAILABLE", `creating topics failed: ${(error as Error).message}`, {
      retriable: true,
      cause: error,
    });
  }
}
