import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { packageVersion } from "../../src/config/project-paths.js";
import { runCli } from "../support/cli-process.js";

describe("sluice config print (CLI process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-cli-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a negative batch size from the environment exits non-zero naming the key, value and rule", async () => {
    const result = await runCli(["config", "print"], { SLUICE_BATCHING__MAX_BATCH_SIZE: "-4" });
    expect(result.code).not.toBe(0);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain("CONFIG_INVALID");
    expect(result.stderr).toContain("batching.maxBatchSize = -4");
    expect(result.stderr).toContain("SLUICE_BATCHING__MAX_BATCH_SIZE");
    expect(result.stderr).toMatch(/>=\s*1/);
    expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace for a SluiceError
  });

  it("a negative batch size in the YAML file fails the same way and names the file", async () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(file, "batching:\n  maxBatchSize: -1\n");
    const result = await runCli(["--config", file, "config", "print"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("batching.maxBatchSize = -1");
    expect(result.stderr).toContain(file);
  });

  it("prints the effective configuration as YAML: file < env, secrets masked", async () => {
    const file = join(dir, "good.yaml");
    writeFileSync(
      file,
      [
        "kafka:",
        "  sasl: { mechanism: scram-sha-256, username: svc, password: hunter2-secret }",
        "batching:",
        "  maxBatchSize: 16",
        "  maxWaitMs: 5",
        "",
      ].join("\n"),
    );
    const result = await runCli(["config", "print"], {
      SLUICE_CONFIG: file,
      SLUICE_BATCHING__MAX_WAIT_MS: "7",
      KAFKA_BROKERS: "broker-a:9092,broker-b:9092",
    });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("hunter2-secret");
    const printed = parse(result.stdout) as Record<string, Record<string, unknown>>;
    expect(printed["batching"]).toMatchObject({ maxBatchSize: 16, maxWaitMs: 7, maxBatchTokens: 8192 });
    expect(printed["kafka"]).toMatchObject({
      brokers: ["broker-a:9092", "broker-b:9092"],
      sasl: { mechanism: "scram-sha-256", username: "svc", password: "********" },
    });
  });

  it("--version prints the package version", async () => {
    const result = await runCli(["--version"]);
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(packageVersion());
  });
});
