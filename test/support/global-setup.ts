import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { homedir, tmpdir } from "node:os";
import { join, sep } from "node:path";
import type { TestProject } from "vitest/node";
import { packageRoot } from "../../src/config/project-paths.js";
import { LocalBroker } from "../../src/devtools/local-broker.js";
import { waitUntilReady, warmUpCoordinators } from "../../src/kafka/probes/broker-readiness.js";
import { buildDist } from "./built-cli.js";

/**
 * Decides where integration tests find Kafka, once per `vitest run` (all projects share it), and
 * provides the bootstrap address as `kafkaBrokers` (read it with `testBrokers()` from ./kafka-harness.js):
 *   1. KAFKA_BROKERS when set (e.g. the dev broker, CI services);
 *   2. else a testcontainers `apache/kafka:3.9.1` when a Docker engine answers within ~1 s;
 *   3. else the project's LocalBroker (Java + Maven), in a temp run folder so it never touches a
 *      user's `.sluice/kafka` broker, stopped and removed in teardown.
 * It also builds dist/, which the CLI tests run (./built-cli.ts), while the broker starts.
 * When every selected test file is a unit test neither happens.
 * KAFKA_VERSION (e.g. 4.1.1) picks the broker version for 2 and 3.
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  if (!(await needsKafka(project))) {
    const fromEnv = process.env["KAFKA_BROKERS"];
    if (fromEnv) project.provide("kafkaBrokers", fromEnv);
    return undefined;
  }
  const building = buildDist();
  let stop: (() => Promise<void>) | undefined;
  try {
    stop = await startBroker(project);
    await building;
  } catch (error) {
    await building.catch(() => undefined);
    await stop?.();
    throw error;
  }
  return stop;
}

async function startBroker(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const fromEnv = process.env["KAFKA_BROKERS"];
  if (fromEnv) {
    project.provide("kafkaBrokers", fromEnv);
    return undefined;
  }
  const version = process.env["KAFKA_VERSION"] ?? "3.9.1";
  if (await dockerAnswers()) {
    const { bootstrap, stop } = await startContainer(version);
    provide(project, bootstrap);
    return stop;
  }

  await reapOrphans();
  const runDir = mkdtempSync(join(tmpdir(), RUN_DIR_PREFIX));
  writeFileSync(join(runDir, OWNER_FILE), `${process.pid}\n`);
  const broker = new LocalBroker({
    runDir,
    kafkaVersion: version,
    port: 0,
    heapMb: 768,
    // Share resolved classpaths across runs so only the first run pays for Maven.
    classpathCacheDir: join(packageRoot(), ".sluice", "cache"),
    onProgress: (message) => console.log(`[test kafka] ${message}`),
  });
  const status = await broker.start();
  console.log(`[test kafka] Apache Kafka ${version} ready on ${status.bootstrap} (run folder ${runDir})`);
  provide(project, status.bootstrap!);
  return async () => {
    await broker.stop();
    rmSync(runDir, { recursive: true, force: true });
  };
}

const RUN_DIR_PREFIX = "sluice-test-kafka-";
const OWNER_FILE = "owner.pid";

/**
 * A test run killed before its teardown (SIGKILL, crash) leaves its detached broker running. Stop
 * brokers of earlier runs whose vitest process is gone; LocalBroker.stop only signals the pid it
 * recorded, after checking that pid is still that broker.
 */
async function reapOrphans(): Promise<void> {
  for (const name of readdirSync(tmpdir())) {
    if (!name.startsWith(RUN_DIR_PREFIX)) continue;
    const runDir = join(tmpdir(), name);
    const ownerFile = join(runDir, OWNER_FILE);
    if (!existsSync(ownerFile)) continue;
    const owner = Number(readFileSync(ownerFile, "utf8").trim());
    if (processAlive(owner)) continue;
    await new LocalBroker({ runDir }).stop().catch(() => {});
    rmSync(runDir, { recursive: true, force: true });
  }
}

function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Tests read the address with `testBrokers()`; it also goes into KAFKA_BROKERS because test workers
 * are forked after this setup and inherit the environment, so CLI processes that tests spawn with
 * `process.env` reach the same broker.
 */
function provide(project: TestProject, bootstrap: string): void {
  project.provide("kafkaBrokers", bootstrap);
  process.env["KAFKA_BROKERS"] = bootstrap;
}

/**
 * False when the run only selects files under test/unit (no broker, no build needed), in any of the
 * projects the run selected (`--project`).
 */
async function needsKafka(project: TestProject): Promise<boolean> {
  // `filenamePattern` holds the CLI file filters; it is internal to vitest, so fall back to "yes".
  const filters = (project.vitest as unknown as { filenamePattern?: string[] }).filenamePattern ?? [];
  try {
    const unitDir = join(packageRoot(), "test", "unit") + sep;
    const projects = project.vitest.projects.length > 0 ? project.vitest.projects : [project];
    const files: string[] = [];
    for (const p of projects) files.push(...(await p.globTestFiles(filters)).testFiles);
    return files.length === 0 || files.some((file) => !file.startsWith(unitDir));
  } catch {
    return true;
  }
}

/** A quick, quiet probe: is a Docker engine listening? (testcontainers' own probe is slow and loud.) */
async function dockerAnswers(): Promise<boolean> {
  const host = process.env["DOCKER_HOST"];
  let target: { socketPath?: string; host?: string; port?: number };
  if (host?.startsWith("tcp://")) {
    const url = new URL(host.replace("tcp://", "http://"));
    target = { host: url.hostname, port: Number(url.port || 2375) };
  } else {
    const candidates = host?.startsWith("unix://")
      ? [host.slice("unix://".length)]
      : ["/var/run/docker.sock", join(homedir(), ".docker", "run", "docker.sock")];
    const socketPath = candidates.find((p) => existsSync(p));
    if (!socketPath) return false;
    target = { socketPath };
  }
  return new Promise((resolvePromise) => {
    const req = request({ ...target, path: "/_ping", method: "GET", timeout: 1000 }, (res) => {
      res.resume();
      resolvePromise(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolvePromise(false));
    req.end();
  });
}

async function startContainer(version: string): Promise<{ bootstrap: string; stop: () => Promise<void> }> {
  const { GenericContainer, getContainerRuntimeClient } = await import("testcontainers");
  const { createServer } = await import("node:net");
  const host = (await getContainerRuntimeClient()).info.containerRuntime.host;
  // The advertised listener must name the host port before the container starts, so pick it here.
  const hostPort = await new Promise<number>((resolvePromise) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolvePromise(typeof address === "object" && address ? address.port : 0));
    });
  });
  const container = await new GenericContainer(`apache/kafka:${version}`)
    .withExposedPorts({ container: 9092, host: hostPort })
    .withEnvironment({
      KAFKA_NODE_ID: "1",
      KAFKA_PROCESS_ROLES: "broker,controller",
      KAFKA_LISTENERS: "PLAINTEXT://:9092,CONTROLLER://:9093",
      KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://${host}:${hostPort}`,
      KAFKA_CONTROLLER_LISTENER_NAMES: "CONTROLLER",
      KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
      KAFKA_CONTROLLER_QUORUM_VOTERS: "1@localhost:9093",
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: "1",
      KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: "1",
      KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: "1",
      KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: "0",
    })
    .withStartupTimeout(120_000)
    .start();
  const bootstrap = `${host}:${hostPort}`;
  await waitUntilReady(bootstrap, 120_000);
  await warmUpCoordinators(bootstrap);
  console.log(`[test kafka] apache/kafka:${version} container ready on ${bootstrap}`);
  return { bootstrap, stop: async () => void (await container.stop()) };
}

declare module "vitest" {
  export interface ProvidedContext {
    kafkaBrokers: string;
  }
}
