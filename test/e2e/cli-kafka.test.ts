import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { afterAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/config/project-paths.js";
import type { LocalBrokerStatus } from "../../src/devtools/local-broker.js";
import { fixThrottleCheckDelay } from "../../src/kafka/protocol/throttle-check-delay.js";
import { runCli } from "../support/cli-process.js";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie answers kill(0) but is gone for our purposes.
  const stat = `/proc/${pid}/stat`;
  return !(existsSync(stat) && / Z /.test(readFileSync(stat, "utf8")));
}

describe("sluice kafka (CLI process)", () => {
  const home = mkdtempSync(join(tmpdir(), "sluice-cli-kafka-"));
  let startedPid: number | undefined;
  afterAll(async () => {
    // Never leave a broker behind, even when an assertion failed half-way.
    if (startedPid !== undefined && alive(startedPid)) await runCli(["kafka", "stop", "--home", home]);
    rmSync(home, { recursive: true, force: true });
  });

  it("status on an empty run folder says not running and exits 3", async () => {
    const empty = mkdtempSync(join(tmpdir(), "sluice-cli-kafka-empty-"));
    const result = await runCli(["kafka", "status", "--home", empty]);
    rmSync(empty, { recursive: true, force: true });
    expect(result.code).toBe(3);
    expect(result.stdout).toContain("not running");
  });

  it("without Java, start fails with one message naming the alternatives", async () => {
    const empty = mkdtempSync(join(tmpdir(), "sluice-cli-kafka-nojava-"));
    const result = await runCli(["kafka", "start", "--home", empty], {
      JAVA_HOME: join(empty, "no-such-jdk"),
    });
    rmSync(empty, { recursive: true, force: true });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^DEPENDENCY_MISSING: /);
    for (const hint of ["Java 17+", "Maven", "Docker", "KAFKA_BROKERS"])
      expect(result.stderr).toContain(hint);
  });

  it("start, status, start again, stop: one broker and leaves no process", async () => {
    // Reuse a classpath the test harness already resolved (same pom hash), so Maven runs at most once.
    const cache = join(packageRoot(), ".sluice", "cache");
    mkdirSync(home, { recursive: true });
    if (existsSync(cache)) {
      for (const f of readdirSync(cache))
        if (f.startsWith("classpath-")) copyFileSync(join(cache, f), join(home, f));
    }

    const started = await runCli([
      "kafka",
      "start",
      "--home",
      home,
      "--port",
      "0",
      "--heap-mb",
      "384",
      "--json",
    ]);
    expect(started.stderr).toBe("");
    expect(started.code).toBe(0);
    const status = JSON.parse(started.stdout) as LocalBrokerStatus;
    startedPid = status.pid;
    expect(status.running).toBe(true);
    expect(status.bootstrap).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(alive(status.pid!)).toBe(true);

    fixThrottleCheckDelay();
    const admin = new Kafka({ brokers: [status.bootstrap!], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    const cluster = await admin.describeCluster();
    await admin.disconnect();
    expect(cluster.brokers).toHaveLength(1);

    const running = await runCli(["kafka", "status", "--home", home]);
    expect(running.code).toBe(0);
    expect(running.stdout).toContain(
      `running: Kafka ${status.kafkaVersion} on ${status.bootstrap} (pid ${status.pid}`,
    );

    const again = await runCli(["kafka", "start", "--home", home, "--json"]);
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ alreadyRunning: true, pid: status.pid });

    const stopped = await runCli(["kafka", "stop", "--home", home]);
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toContain(`stopped Kafka (pid ${status.pid}`);
    expect(alive(status.pid!)).toBe(false);

    const after = await runCli(["kafka", "status", "--home", home]);
    expect(after.code).toBe(3);
  });
});
