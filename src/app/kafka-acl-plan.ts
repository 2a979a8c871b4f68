import { backfillResultsTopic, type SluiceConfig } from "../config/config-schema.js";
import type { KafkaOperation, KafkaResourceType } from "../kafka/client/kafka-failure.js";
import { changelogTopicFor } from "../kafka/client/topic-admin.js";
import { BACKFILL_TRANSACTIONAL_ID_PREFIX } from "../kafka/runs/run-manifest-store.js";
import { BATCH_TRANSACTIONAL_ID_PREFIX } from "../kafka/write/kafka-topic-sink.js";
import { resultTransactionalIdPrefix } from "../kafka/write/result-publisher.js";

/** One ALLOW ACL a Sluice command needs. */
export interface AclEntry {
  resourceType: KafkaResourceType;
  patternType: "LITERAL" | "PREFIXED";
  name: string;
  operation: KafkaOperation;
  /** Commands that need it. */
  commands: string[];
  /** Why, in a few words (printed as a comment). */
  why: string;
}

export interface AclPlanOptions {
  /** Include CREATE on the topics (only when Sluice is to create missing topics itself). */
  createTopics: boolean;
  /** Kafka topics of `sluice batch --input kafka:T` / `--output kafka:U` (default: requests / results). */
  batchInput?: string;
  batchOutput?: string;
}

type Acl = Omit<AclEntry, "commands">;
const literal = (
  resourceType: KafkaResourceType,
  name: string,
  operation: KafkaOperation,
  why: string,
): Acl => ({
  resourceType,
  patternType: "LITERAL",
  name,
  operation,
  why,
});
const prefixed = (
  resourceType: KafkaResourceType,
  name: string,
  operation: KafkaOperation,
  why: string,
): Acl => ({
  ...literal(resourceType, name, operation, why),
  patternType: "PREFIXED",
});

/**
 * What each command needs, measured against a broker with StandardAuthorizer and
 * allow.everyone.if.no.acl.found=false (test/secure/acls.test.ts removes each one and checks the named
 * failure). DESCRIBE is implied by READ and WRITE; an idempotent producer needs only WRITE on its
 * topics (Kafka 3.0+). A new command is one more entry here.
 */
const COMMANDS: Record<string, (c: SluiceConfig, o: AclPlanOptions) => Acl[]> = {
  serve: (c, o) => {
    const group = c.consumer.groupId;
    // Both lanes are consumed by the group; each input topic has its own dedup changelog.
    const inputs = [...c.topics.requests, ...c.topics.backfill];
    const backfillResults = backfillResultsTopic(c.topics);
    const extraOutputs =
      c.topics.backfill.length > 0 && backfillResults !== c.topics.results ? [backfillResults] : [];
    const runs = c.topics.backfill.length > 0 ? [c.topics.runs] : [];
    const topics = [c.topics.results, c.topics.deadLetters, c.topics.freshness, ...extraOutputs, ...runs];
    return [
      ...c.topics.requests.map((t) => literal("TOPIC", t, "READ", "request topic")),
      ...c.topics.backfill.map((t) => literal("TOPIC", t, "READ", "backfill topic (the backfill lane)")),
      ...inputs.flatMap((t) => {
        const changelog = changelogTopicFor(c.topics.dedupChangelog, group, t);
        return [
          literal("TOPIC", changelog, "READ", "dedup changelog: restore"),
          literal("TOPIC", changelog, "WRITE", "dedup changelog: remember ids and offsets"),
        ];
      }),
      literal("TOPIC", c.topics.results, "WRITE", "results"),
      literal("TOPIC", c.topics.deadLetters, "WRITE", "dead letters"),
      literal("TOPIC", c.topics.freshness, "WRITE", "freshness heartbeats"),
      ...extraOutputs.map((t) => literal("TOPIC", t, "WRITE", "backfill results (topics.backfillResults)")),
      // The live page's runs table reads the run manifests on request (serve runs without these).
      ...(c.topics.backfill.length > 0 && c.observability.ui
        ? [literal("TOPIC", c.topics.runs, "READ", "live page: the backfill runs table")]
        : []),
      ...runs.map((t) => literal("TOPIC", t, "WRITE", "backfill runs' cost shares (topics.runs)")),
      literal(
        "TOPIC",
        c.topics.modelControl,
        "READ",
        "model control: the group's decisions (topics.modelControl)",
      ),
      literal("TOPIC", c.topics.modelControl, "WRITE", "model control: each partition's switch boundary"),
      ...(c.candidate && c.candidate.shadowShare > 0
        ? [literal("TOPIC", c.topics.shadowResults, "WRITE", "the candidate's shadow results")]
        : []),
      literal("GROUP", group, "READ", "the consumer group (join, commit offsets in transactions)"),
      ...(c.delivery.transactions
        ? [
            prefixed(
              "TRANSACTIONAL_ID",
              resultTransactionalIdPrefix(group),
              "WRITE",
              "one transactional producer per input partition",
            ),
          ]
        : []),
      ...(o.createTopics
        ? [
            ...inputs,
            ...topics,
            ...inputs.map((t) => changelogTopicFor(c.topics.dedupChangelog, group, t)),
            c.topics.modelControl,
          ].map((t) => literal("TOPIC", t, "CREATE", "Sluice creates missing topics"))
        : []),
    ];
  },
  status: (c) => [
    ...c.topics.requests.map((t) => literal("TOPIC", t, "READ", "request topic: offsets and timestamps")),
    literal("GROUP", c.consumer.groupId, "DESCRIBE", "the group's committed offsets"),
  ],
  batch: (c, o) => [
    literal(
      "TOPIC",
      o.batchInput ?? c.topics.requests[0] ?? "sluice.requests",
      "READ",
      "batch --input kafka:TOPIC",
    ),
    literal("TOPIC", o.batchOutput ?? c.topics.results, "WRITE", "batch --output kafka:TOPIC"),
    prefixed(
      "TRANSACTIONAL_ID",
      BATCH_TRANSACTIONAL_ID_PREFIX,
      "WRITE",
      "one transactional producer per shard",
    ),
  ],
  // submit, status and export together (the runs topic is created by the first submit).
  backfill: (c, o) => {
    const backfill = c.topics.backfill[0] ?? "sluice.backfill";
    const results = backfillResultsTopic(c.topics);
    return [
      literal("TOPIC", backfill, "WRITE", "backfill submit: rows"),
      literal("TOPIC", backfill, "READ", "backfill export: the run's submitted ids"),
      literal("TOPIC", c.topics.runs, "WRITE", "backfill submit: the run manifest"),
      literal("TOPIC", c.topics.runs, "READ", "run manifests (resume, status, export)"),
      literal("TOPIC", results, "READ", "backfill status/export: the run's results"),
      literal("TOPIC", c.topics.deadLetters, "READ", "backfill status/export: the run's dead letters"),
      prefixed(
        "TRANSACTIONAL_ID",
        BACKFILL_TRANSACTIONAL_ID_PREFIX,
        "WRITE",
        "one transactional submitter per run (rows and manifest in one transaction)",
      ),
      ...(o.createTopics
        ? [literal("TOPIC", c.topics.runs, "CREATE", "the first submit creates the runs topic")]
        : []),
    ];
  },
  // promote, rollback and status (docs/model-upgrades.md).
  model: (c, o) => [
    literal("TOPIC", c.topics.modelControl, "WRITE", "model promote/rollback: the decision"),
    literal("TOPIC", c.topics.modelControl, "READ", "model status, and promote waiting for the boundaries"),
    ...c.topics.requests.map((t) =>
      literal("TOPIC", t, "DESCRIBE", "the online partitions that must switch"),
    ),
    literal("GROUP", c.consumer.groupId, "DESCRIBE", "the members that did not switch"),
    ...(o.createTopics
      ? [literal("TOPIC", c.topics.modelControl, "CREATE", "the first promote creates the control topic")]
      : []),
  ],
};

/** Names of the commands `aclPlan` knows. */
export const ACL_COMMANDS = Object.keys(COMMANDS);

/** The minimal ALLOW ACLs of `commands` for this configuration; one entry per resource and operation. */
export function aclPlan(
  config: SluiceConfig,
  commands: readonly string[],
  options: AclPlanOptions,
): AclEntry[] {
  const out = new Map<string, AclEntry>();
  for (const command of commands) {
    const needs = COMMANDS[command];
    if (!needs) continue;
    for (const acl of needs(config, options)) {
      const key = `${acl.resourceType}|${acl.patternType}|${acl.name}|${acl.operation}`;
      const seen = out.get(key);
      if (seen) {
        if (!seen.commands.includes(command)) seen.commands.push(command);
      } else out.set(key, { ...acl, commands: [command] });
    }
  }
  return [...out.values()];
}

const FLAG: Record<KafkaResourceType, string> = {
  TOPIC: "--topic",
  GROUP: "--group",
  TRANSACTIONAL_ID: "--transactional-id",
  CLUSTER: "--cluster",
};

/** `kafka-acls.sh` commands that add the plan's ACLs for `principal` (e.g. `User:sluice`). */
export function formatKafkaAcls(entries: readonly AclEntry[], principal: string, bootstrap: string): string {
  const lines = [
    `# Minimal ACLs for ${principal}; run as an administrator (--command-config holds its TLS/SASL settings).`,
  ];
  for (const e of entries) {
    lines.push(`# ${e.commands.join(", ")}: ${e.why}`);
    lines.push(
      [
        "kafka-acls.sh",
        `--bootstrap-server ${bootstrap}`,
        "--command-config admin.properties",
        "--add",
        `--allow-principal '${principal}'`,
        `--operation ${e.operation}`,
        e.resourceType === "CLUSTER" ? FLAG.CLUSTER : `${FLAG[e.resourceType]} '${e.name}'`,
        ...(e.patternType === "PREFIXED" ? ["--resource-pattern-type prefixed"] : []),
      ].join(" "),
    );
  }
  return `${lines.join("\n")}\n`;
}
