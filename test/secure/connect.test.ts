import { describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { runCli } from "../support/cli-process.js";
import {
  aclsFor,
  commitGroupAsAdmin,
  createServeTopics,
  grant,
  produceAsAdmin,
  secrets,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// Connecting to the secured broker: each wrong setting gives its own error class naming what to set,
// quickly (never the kafkajs retry storm), and no secret appears in any output.
const QUICK_MS = 45_000;

async function status(configPath: string) {
  const started = Date.now();
  const result = await runCli(["status", "--config", configPath], {}, QUICK_MS);
  return { ...result, ms: Date.now() - started, all: `${result.stdout}${result.stderr}` };
}

function noSecrets(text: string): void {
  for (const secret of secrets()) expect(text).not.toContain(secret);
}

describe("secured broker: authentication and TLS failures", () => {
  it("the application user with the status ACLs reads the group's status", async () => {
    const base = uniqueBase("conn-ok");
    const config = writeConfig(base);
    await createServeTopics(base);
    await commitGroupAsAdmin(base);
    await grant(await aclsFor(config, ["--command", "status"]), `User:${secureKafka().app.username}`);
    const result = await status(config.path);
    expect(result.code, result.all).toBe(0);
    expect(result.stdout).toContain(`${base}.requests`);
    noSecrets(result.all);
  });

  it("status reads lag seconds with READ on the topic only: the probe joins no group", async () => {
    const base = uniqueBase("conn-probe");
    const config = writeConfig(base);
    await createServeTopics(base);
    await commitGroupAsAdmin(base);
    await produceAsAdmin(`${base}.requests`, [
      { key: "a", ...encodeRequest({ id: "a", text: "waiting" }, "json") },
    ]);
    const plan = await aclsFor(config, ["--command", "status"]);
    // READ on the topic, DESCRIBE on the group: no group prefix for throwaway readers.
    expect(plan.filter((e) => e.patternType === "PREFIXED")).toEqual([]);
    await grant(plan, `User:${secureKafka().app.username}`);
    const json = await runCli(
      ["status", "--config", config.path, "--json", "--topic", `${base}.requests`],
      {},
      QUICK_MS,
    );
    expect(json.code, json.stderr).toBe(0);
    const status = JSON.parse(json.stdout) as {
      partitions: { lagRecords: number; lagSeconds: number | null }[];
    };
    expect(status.partitions.some((p) => p.lagRecords > 0 && typeof p.lagSeconds === "number")).toBe(true);
  });

  it("a wrong password is AUTHENTICATION_FAILED naming the user and the keys to check", async () => {
    const config = writeConfig(uniqueBase("conn-pw"), {
      sasl: {
        mechanism: "scram-sha-512",
        username: secureKafka().app.username,
        password: "not-the-password",
      },
    });
    const result = await status(config.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^AUTHENTICATION_FAILED: .*"sluice-app".*kafka\.sasl\.password/m);
    expect(result.all).not.toContain("not-the-password");
    noSecrets(result.all);
  });

  it("an untrusted CA is TLS_FAILED naming kafka.ssl.caPath", async () => {
    const config = writeConfig(uniqueBase("conn-ca"), { ssl: true });
    const result = await status(config.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^TLS_FAILED: .*not signed by a trusted CA.*kafka\.ssl\.caPath/m);
    noSecrets(result.all);
  });

  it("a host name the certificate does not name is TLS_FAILED naming kafka.ssl.servername", async () => {
    const config = writeConfig(uniqueBase("conn-host"), {
      ssl: { caPath: secureKafka().caPath, servername: "not-in-the-certificate.example" },
    });
    const result = await status(config.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^TLS_FAILED: .*not issued for the host name.*kafka\.ssl\.servername/m);
  });

  it("TLS off against the TLS listener is BROKER_UNAVAILABLE naming the address and kafka.ssl", async () => {
    const config = writeConfig(uniqueBase("conn-plain"), { ssl: false, connectionTimeoutMs: 2000 });
    const result = await status(config.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(secureKafka().bootstrap);
    expect(result.stderr).toMatch(/^(BROKER_UNAVAILABLE|TLS_FAILED): .*kafka\.ssl/m);
    noSecrets(result.all);
  });

  it("an unreachable broker is one BROKER_UNAVAILABLE line naming the address, no stack traces", async () => {
    const config = writeConfig(uniqueBase("conn-down"), { brokers: ["127.0.0.1:1"], ssl: false });
    delete (config as { sasl?: unknown }).sasl;
    const result = await status(config.path);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^BROKER_UNAVAILABLE: cannot reach Kafka at 127\.0\.0\.1:1 .*ECONNREFUSED/m,
    );
    expect(result.stderr).not.toMatch(/\n\s+at /);

    // serve too: kafkajs's retries are warnings without stack traces; one error line says what to do.
    const serve = await runCli(["serve", "--config", config.path], {}, QUICK_MS);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toMatch(/^BROKER_UNAVAILABLE: cannot reach Kafka at 127\.0\.0\.1:1 /m);
    expect(`${serve.stdout}${serve.stderr}`).not.toContain('"stack"');
    expect(serve.stdout).not.toContain('"level":50');
  });

  it("mutual TLS: the client certificate is the principal; without it the broker refuses", async () => {
    const k = secureKafka();
    const base = uniqueBase("conn-mtls");
    const withCert = writeConfig(base, {
      brokers: [k.mtlsBootstrap],
      ssl: { caPath: k.caPath, certPath: k.client.certPath, keyPath: k.client.keyPath },
      sasl: undefined,
    });
    await createServeTopics(base);
    await commitGroupAsAdmin(base);
    await grant(await aclsFor(withCert, ["--command", "status"]), k.client.principal);
    const ok = await status(withCert.path);
    expect(ok.code, ok.all).toBe(0);
    expect(ok.stdout).toContain(`${base}.requests`);

    const withoutCert = writeConfig(base, {
      brokers: [k.mtlsBootstrap],
      ssl: { caPath: k.caPath },
      sasl: undefined,
    });
    const refused = await status(withoutCert.path);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^(TLS_FAILED|BROKER_UNAVAILABLE): /m);
  });
});
