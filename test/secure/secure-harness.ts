import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AclOperationTypes,
  AclPermissionTypes,
  AclResourceTypes,
  Kafka,
  type KafkaConfig,
  logLevel,
  ResourcePatternTypes,
} from "kafkajs";
import type { AclEntry } from "../../src/app/kafka-acl-plan.js";
import type { SecureBrokerCredentials } from "../../src/devtools/secure-broker.js";
import { fixAbortedTransactionOrder } from "../../src/kafka/protocol/aborted-transaction-order.js";
import { fixThrottleCheckDelay } from "../../src/kafka/protocol/throttle-check-delay.js";
import { runCli } from "../support/cli-process.js";

/** Where the global setup (secure-setup.ts) leaves the broker's address and credentials. */
export const SECURE_KAFKA_ENV = "SECURE_KAFKA_TEST";

export interface SecureKafka extends SecureBrokerCredentials {
  bootstrap: string;
  runDir: string;
}

export function secureKafka(): SecureKafka {
  const raw = process.env[SECURE_KAFKA_ENV];
  if (!raw) throw new Error(`no secured broker: run these tests with npm run test:secure`);
  return JSON.parse(raw) as SecureKafka;
}

export function uniqueBase(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString("hex")}`;
}

/** A kafkajs client of the admin (super user), for setting up topics and ACLs and reading results. */
export function adminKafka(): Kafka {
  fixAbortedTransactionOrder();
  fixThrottleCheckDelay();
  const k = secureKafka();
  const config: KafkaConfig = {
    clientId: uniqueBase("secure-admin"),
    brokers: [k.bootstrap],
    ssl: { ca: [readFileSync(k.caPath, "utf8")] },
    sasl: { mechanism: "scram-sha-512", username: k.admin.username, password: k.admin.password },
    logLevel: logLevel.NOTHING,
  };
  return new Kafka(config);
}

export async function createTopicsAsAdmin(
  topics: { topic: string; numPartitions?: number; compact?: boolean }[],
) {
  const admin = adminKafka().admin();
  await admin.connect();
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.numPartitions ?? 1,
        replicationFactor: 1,
        ...(t.compact ? { configEntries: [{ name: "cleanup.policy", value: "compact" }] } : {}),
      })),
    });
  } finally {
    await admin.disconnect();
  }
}

const RESOURCE = {
  TOPIC: AclResourceTypes.TOPIC,
  GROUP: AclResourceTypes.GROUP,
  TRANSACTIONAL_ID: AclResourceTypes.TRANSACTIONAL_ID,
  CLUSTER: AclResourceTypes.CLUSTER,
} as const;
const OPERATION = {
  READ: AclOperationTypes.READ,
  WRITE: AclOperationTypes.WRITE,
  DESCRIBE: AclOperationTypes.DESCRIBE,
  CREATE: AclOperationTypes.CREATE,
} as const;

/** kafkajs's form of an ALLOW ACL of the plan for `principal` (also its delete filter). */
function kafkaAcl(e: AclEntry, principal: string) {
  return {
    resourceType: RESOURCE[e.resourceType],
    resourceName: e.name,
    resourcePatternType:
      e.patternType === "PREFIXED" ? ResourcePatternTypes.PREFIXED : ResourcePatternTypes.LITERAL,
    principal,
    host: "*",
    operation: OPERATION[e.operation],
    permissionType: AclPermissionTypes.ALLOW,
  };
}

/** Grants `entries` (what `sluice acls --format json` prints) to `principal`, as the admin. */
export async function grant(entries: readonly AclEntry[], principal: string): Promise<void> {
  if (entries.length === 0) return;
  const admin = adminKafka().admin();
  await admin.connect();
  try {
    await admin.createAcls({ acl: entries.map((e) => kafkaAcl(e, principal)) });
  } finally {
    await admin.disconnect();
  }
}

export interface SecureConfig {
  dir: string;
  path: string;
  base: string;
}

/**
 * A sluice.config.yaml (JSON is YAML) for the application user on private topics and group: TLS with
 * the broker's CA, SCRAM-SHA-512 with the password in a file. `kafka` replaces parts of the kafka section.
 */
export function writeConfig(
  base: string,
  kafka: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): SecureConfig {
  const k = secureKafka();
  const dir = mkdtempSync(join(tmpdir(), "sluice-secure-config-"));
  const passwordFile = join(dir, "app.password");
  writeFileSync(passwordFile, `${k.app.password}\n`, { mode: 0o600 });
  const config = {
    kafka: {
      brokers: [k.bootstrap],
      ssl: { caPath: k.caPath },
      sasl: { mechanism: "scram-sha-512", username: k.app.username, passwordFile },
      connectionTimeoutMs: 5000,
      ...kafka,
    },
    topics: {
      requests: [`${base}.requests`],
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      freshness: `${base}.freshness`,
    },
    consumer: {
      groupId: `${base}-group`,
      sessionTimeoutMs: 6000,
      heartbeatIntervalMs: 1000,
      restoreRetryMs: 500,
    },
    observability: { metricsPort: 0, heartbeatIntervalMs: 1000, lagIntervalMs: 1000, logLevel: "info" },
    ...extra,
  };
  const path = join(dir, "sluice.config.yaml");
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`);
  return { dir, path, base };
}

/** The topics serve uses for `base`, created by the admin (serve then needs no CREATE). */
export async function createServeTopics(base: string, partitions = 2): Promise<void> {
  await createTopicsAsAdmin([
    { topic: `${base}.requests`, numPartitions: partitions },
    { topic: `${base}.results`, numPartitions: partitions },
    { topic: `${base}.dlq`, numPartitions: partitions },
    { topic: `${base}.freshness`, numPartitions: 1 },
    { topic: `${base}.dedup.${base}-group.${base}.requests`, numPartitions: partitions, compact: true },
  ]);
}

/**
 * Makes `<base>-group` a group that has consumed (offset 0 committed on each request partition), as
 * the admin: `sluice status` refuses a group that does not exist (GROUP_NOT_FOUND).
 */
export async function commitGroupAsAdmin(base: string, partitions = 2): Promise<void> {
  const admin = adminKafka().admin();
  await admin.connect();
  try {
    await admin.setOffsets({
      groupId: `${base}-group`,
      topic: `${base}.requests`,
      partitions: Array.from({ length: partitions }, (_, partition) => ({ partition, offset: "0" })),
    });
  } finally {
    await admin.disconnect();
  }
}

/** Runs `sluice acls --format json` for the config: the ACL set the tests grant. */
export async function aclsFor(config: SecureConfig, args: string[] = []): Promise<AclEntry[]> {
  const out = await runCli(["acls", "--format", "json", "--config", config.path, ...args]);
  if (out.code !== 0) throw new Error(`sluice acls failed: ${out.stderr}`);
  return JSON.parse(out.stdout) as AclEntry[];
}

/** Environment for child processes: the config file only (no KAFKA_BROKERS of the runner's shell). */
export function configEnv(config: SecureConfig): Record<string, string> {
  return { SLUICE_CONFIG: config.path, KAFKA_BROKERS: "", KAFKAJS_NO_PARTITIONER_WARNING: "1" };
}

/** Every secret of the secured broker, for "no secret in any log" checks. */
export function secrets(): string[] {
  const k = secureKafka();
  return [k.admin.password, k.app.password];
}

/** Produces `messages` as the admin. */
export async function produceAsAdmin(
  topic: string,
  messages: { key: string; value: Buffer; headers?: Record<string, string> }[],
): Promise<void> {
  const producer = adminKafka().producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages });
  } finally {
    await producer.disconnect();
  }
}

/**
 * Reads `topic` from the beginning as the admin, read_committed, until at least `expected` records
 * arrived and then to the end offsets (`readCommitted`), or `timeoutMs` passed.
 */
export async function readCommittedAsAdmin(
  topic: string,
  opts: { expected: number; timeoutMs?: number },
): Promise<{ key: string | null; value: Buffer | null; headers: Record<string, string> }[]> {
  // Imported here: serve-process reaches vitest's inject(), which the global setup (./secure-setup.ts,
  // a reader of this module's SECURE_KAFKA_ENV) must not load.
  const { readCommitted } = await import("../support/serve-process.js");
  const records = await readCommitted(topic, { ...opts, kafka: adminKafka() });
  return records.map(({ key, value, headers }) => ({
    key,
    value,
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)])),
  }));
}

/** Removes `entries` for `principal` again (prefixed ACLs are shared by every test of the run). */
export async function revoke(entries: readonly AclEntry[], principal: string): Promise<void> {
  if (entries.length === 0) return;
  const admin = adminKafka().admin();
  await admin.connect();
  try {
    await admin.deleteAcls({ filters: entries.map((e) => kafkaAcl(e, principal)) });
  } finally {
    await admin.disconnect();
  }
}
