import { createHash } from "node:crypto";
import type { Kafka } from "kafkajs";
import { SluiceError } from "../../sluice-error.js";
import { withAdmin } from "./admin-session.js";
import { errorChain, kafkaFailure } from "./kafka-failure.js";

export interface TopicLayout {
  /** Request topics (created with `partitions` if missing; existing ones keep their count). */
  requests: readonly string[];
  results: string;
  deadLetters: string;
  /** Base name of the dedup changelog; one compacted topic per group and request topic (see changelogTopicFor). */
  dedupChangelog: string;
  /** Consumer group whose changelogs to create (the changelog is scoped by group). */
  groupId: string;
  freshness?: string;
  /** Where backfill-lane results go when that is not `results` (`topics.backfillResults`). */
  backfillResults?: string;
  /** Partitions for topics Sluice creates. */
  partitions: number;
  replicationFactor: number;
  /** `topics.shadowResults`, when the candidate shadows online requests (candidate.shadowShare > 0). */
  shadowResults?: string | undefined;
}

/** Kafka's limit on topic name length. */
export const MAX_TOPIC_NAME_CHARS = 249;

/**
 * Changelog topic of a consumer group for a request topic: `<base>.<groupId>.<requestTopic>`.
 *
 * Scoped by group because the changelog holds the group's dedup ids and its offset checkpoint: a
 * second group on the same requests (a reprocessing run, another deployment) must neither skip to
 * the other group's checkpoint nor see its ids as duplicates, and only one transactional producer
 * (the partition's owner in one group) may write a changelog partition.
 *
 * Kafka topic names allow [a-zA-Z0-9._-] and at most 249 characters; group ids allow anything. If the
 * name has other characters or is too long, each other character becomes `_`, the name is cut, and
 * `-` plus 16 hex chars of SHA-256 over base, group and topic is appended, so distinct groups whose
 * sanitised names coincide still get distinct topics. Valid, short names are used as they are.
 *
 * One changelog topic per request topic, so changelog
 * partition p always belongs to input partition p of that topic and to no other (a single
 * transactional producer per input partition is then the only writer of its changelog partition,
 * which is what makes the restore end offset stable). Adding a request topic later never moves
 * existing state, which a key-prefix scheme over a shared topic could not promise.
 */
export function changelogTopicFor(base: string, groupId: string, requestTopic: string): string {
  const name = `${base}.${groupId}.${requestTopic}`;
  if (name.length <= MAX_TOPIC_NAME_CHARS && /^[a-zA-Z0-9._-]+$/.test(name)) return name;
  const hash = createHash("sha256")
    .update(`${base}\u0000${groupId}\u0000${requestTopic}`)
    .digest("hex")
    .slice(0, 16);
  const clean = name.replace(/[^a-zA-Z0-9._-]/g, "_");
  return `${clean.slice(0, MAX_TOPIC_NAME_CHARS - hash.length - 1)}-${hash}`;
}

/** A topic the processor writes, and the setting that names it (for the message). */
export interface OutputTopic {
  topic: string;
  setting: string;
}

/**
 * Fails with TOPIC_MISSING, naming each topic and its setting, when a topic the processor writes in
 * its transactions does not exist. Producers never create topics (`allowAutoTopicCreation: false`),
 * so without this a missing output topic fails every transaction with "This server does not host
 * this topic-partition", which is retriable, and the partition would reset and retry forever.
 * `sluice serve` creates its topics first (`ensureTopics`); programmatic processors get this check.
 */
export async function assertOutputTopics(kafka: Kafka, outputs: readonly OutputTopic[]): Promise<void> {
  const existing = await withAdmin(kafka, async (admin) => new Set(await admin.listTopics()));
  const missing = outputs.filter(
    (o, i) => !existing.has(o.topic) && outputs.findIndex((x) => x.topic === o.topic) === i,
  );
  if (missing.length === 0) return;
  throw new SluiceError(
    "TOPIC_MISSING",
    `${missing.map((m) => `topic "${m.topic}" (${m.setting})`).join(", ")} ${missing.length === 1 ? "does" : "do"} not exist, or this principal may not DESCRIBE ${missing.length === 1 ? "it" : "them"}; the processor writes ${missing.length === 1 ? "it" : "them"} in its transactions and producers do not create topics: create ${missing.length === 1 ? "it" : "them"} (sluice serve creates every topic it writes at start), or set ${missing.map((m) => m.setting).join(", ")} to an existing topic`,
    { context: { topics: missing.map((m) => m.topic) } },
  );
}

/**
 * Ensures every topic Sluice uses exists with the right partition count and cleanup policy.
 * Returns the partition count of each request topic. A changelog whose partition count differs
 * from its request topic is an error (the 1:1 mapping would be wrong), not silently "fixed".
 */
export async function ensureTopics(kafka: Kafka, layout: TopicLayout): Promise<Map<string, number>> {
  return withAdmin(kafka, async (admin) => {
    const wanted = async (): Promise<Map<string, number>> => {
      const meta = await admin.fetchTopicMetadata({ topics: [] });
      return new Map(meta.topics.map((t) => [t.name, t.partitions.length]));
    };
    let existing = await wanted();
    const plain = [
      layout.results,
      layout.deadLetters,
      ...(layout.freshness ? [layout.freshness] : []),
      ...(layout.backfillResults ? [layout.backfillResults] : []),
      ...(layout.shadowResults ? [layout.shadowResults] : []),
    ];
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
      if (n === undefined)
        throw new SluiceError(
          "AUTHORIZATION_FAILED",
          `request topic ${request} is not visible after creating it: Kafka denies DESCRIBE on TOPIC "${request}" (READ grants it); grant READ (\`sluice acls\` prints every ACL this configuration needs)`,
          { context: { resourceType: "TOPIC", resourceName: request, operation: "DESCRIBE" } },
        );
      requestPartitions.set(request, n);
      const changelog = changelogTopicFor(layout.dedupChangelog, layout.groupId, request);
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
  });
}

async function createIgnoringExisting(
  admin: ReturnType<Kafka["admin"]>,
  topics: Parameters<ReturnType<Kafka["admin"]>["createTopics"]>[0]["topics"],
): Promise<void> {
  const names = topics.map((t) => t.topic);
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.createTopics({ topics, waitForLeaders: true });
      // The controller answers once the topics are created; the broker that answers the next
      // listTopics may list them a moment later (seen in CI: a check right after missed them).
      await untilListed(admin, names);
      return;
    } catch (error) {
      // Another instance may have created them at the same time.
      const type = (error as { type?: string }).type;
      const nested = (error as { errors?: { type?: string }[] }).errors ?? [];
      if (type === "TOPIC_ALREADY_EXISTS" || nested.every((e) => e.type === "TOPIC_ALREADY_EXISTS")) {
        if (nested.length > 0 || type === "TOPIC_ALREADY_EXISTS") {
          // Created by our own earlier attempt or by another instance, whose leader wait is not ours:
          // wait until the broker's metadata lists them, so a check right after this sees them.
          await untilListed(admin, names);
          return;
        }
      }
      // A busy broker can answer the leader wait before the new partitions have leaders
      // (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE): transient, and creating again is safe.
      const pending = errorChain(error).some((e) =>
        LEADERS_PENDING.has(String((e as { type?: unknown }).type)),
      );
      if (attempt < CREATE_ATTEMPTS && pending) {
        await new Promise((r) => setTimeout(r, 250 * attempt));
        continue;
      }
      throw createFailure(error, names);
    }
  }
}

/**
 * Waits (up to LISTED_WAIT_MS) until every topic is in the broker's metadata. A CreateTopics (ours,
 * or another instance's that made ours answer TOPIC_ALREADY_EXISTS) can return before the answering
 * broker lists the topics; past the bound the caller's own check names what is missing.
 */
async function untilListed(admin: ReturnType<Kafka["admin"]>, names: readonly string[]): Promise<void> {
  const deadline = Date.now() + LISTED_WAIT_MS;
  for (;;) {
    const listed = new Set(await admin.listTopics());
    if (names.every((n) => listed.has(n)) || Date.now() > deadline) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
const LISTED_WAIT_MS = 10_000;

/** Tries of a topic creation whose leader wait ended before the leaders were known. */
const CREATE_ATTEMPTS = 5;
const LEADERS_PENDING = new Set(["UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE"]);

function createFailure(error: unknown, names: string[]): SluiceError {
  // A topic the principal may not DESCRIBE looks missing, so a denied CREATE can also mean that.
  const denied = kafkaFailure(error, {
    doing: `creating topics ${names.join(", ")}, which look missing (if they exist, this user may not DESCRIBE them: READ or WRITE on a topic grants DESCRIBE)`,
    access: [
      { operation: "CREATE", resourceType: "TOPIC", names },
      { operation: "CREATE", resourceType: "CLUSTER", names: ["kafka-cluster"] },
    ],
  });
  if (denied) return denied;
  return new SluiceError("BROKER_UNAVAILABLE", `creating topics failed: ${(error as Error).message}`, {
    retriable: true,
    cause: error,
  });
}

/**
 * Creates a one-partition compacted topic if it does not exist (the runs topic, the model control
 * topic); `what` names it in the error, e.g. `the runs topic ${topic} (topics.runs)`.
 */
export async function ensureCompactedTopic(
  kafka: Kafka,
  topic: string,
  replicationFactor: number,
  what: string,
): Promise<void> {
  await withAdmin(kafka, async (admin) => {
    if ((await admin.listTopics()).includes(topic)) return;
    try {
      await createIgnoringExisting(admin, [
        {
          topic,
          numPartitions: 1,
          replicationFactor,
          configEntries: [{ name: "cleanup.policy", value: "compact" }],
        },
      ]);
    } catch (cause) {
      if ((await admin.listTopics()).includes(topic)) return; // created concurrently
      // A denied create already names the ACL to grant; anything else names the topic's setting.
      if (cause instanceof SluiceError && cause.code !== "BROKER_UNAVAILABLE") throw cause;
      const kafkaError = cause instanceof SluiceError ? cause.cause : cause;
      throw new SluiceError("BROKER_UNAVAILABLE", `cannot create ${what}: ${(kafkaError as Error).message}`, {
        cause: kafkaError,
        retriable: true,
        context: { topic },
      });
    }
  });
}
