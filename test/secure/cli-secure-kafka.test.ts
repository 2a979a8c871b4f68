import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli-process.js";

// `sluice kafka start --secure` as a user runs it: its own run folder, a CA there, credentials printed,
// and the layout that makes the application user a plain principal (only the admin is a super user).
describe("sluice kafka start --secure (CLI process)", () => {
  const home = mkdtempSync(join(tmpdir(), "sluice-cli-secure-kafka-"));
  afterAll(async () => {
    await runCli(["kafka", "stop", "--secure", "--home", home]);
    rmSync(home, { recursive: true, force: true });
  });

  it("starts a SASL_SSL broker with a CA and prints how to connect; stop stops it", async () => {
    const started = await runCli(["kafka", "start", "--secure", "--home", home, "--port", "0"], {}, 240_000);
    expect(started.code, started.stderr).toBe(0);
    expect(started.stdout).toMatch(/^CA certificate: .*tls\/ca\.pem$/m);
    expect(started.stdout).toMatch(/^admin \(super user\): admin \/ \S+$/m);
    expect(started.stdout).toMatch(/^application user .*: sluice-app \/ \S+$/m);
    expect(started.stdout).toContain("sasl: { mechanism: scram-sha-512, username: sluice-app");
    const caPath = join(home, "tls", "ca.pem");
    expect(readFileSync(caPath, "utf8")).toContain("BEGIN CERTIFICATE");
    expect(statSync(join(home, "credentials.json")).mode & 0o077).toBe(0);
    const properties = readFileSync(join(home, "server.properties"), "utf8");
    expect(properties).toContain("allow.everyone.if.no.acl.found=false");
    expect(properties).toContain("org.apache.kafka.metadata.authorizer.StandardAuthorizer");
    expect(properties).toMatch(/^super\.users=User:admin$/m);
    expect(properties).toContain("sasl.mechanism.controller.protocol=PLAIN");

    const again = await runCli(["kafka", "start", "--secure", "--home", home, "--json"]);
    const status = JSON.parse(again.stdout) as {
      alreadyRunning: boolean;
      secure: { caPath: string; app: { username: string } };
    };
    expect(status.alreadyRunning).toBe(true);
    expect(status.secure.caPath).toBe(caPath);
    expect(status.secure.app.username).toBe("sluice-app");

    const stopped = await runCli(["kafka", "stop", "--secure", "--home", home]);
    expect(stopped.stdout).toMatch(/^stopped Kafka/);
    expect(existsSync(join(home, "broker.json"))).toBe(false);
  });
});
