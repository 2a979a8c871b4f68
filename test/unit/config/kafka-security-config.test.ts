import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { MASK, maskSecrets } from "../../../src/config/secret-masking.js";
import { isSluiceError } from "../../../src/sluice-error.js";

function configFile(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), "sluice-sec-config-"));
  const file = join(dir, "sluice.config.yaml");
  writeFileSync(file, yaml);
  return file;
}

function invalid(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (isSluiceError(error, "CONFIG_INVALID")) return error.message;
    throw error;
  }
  throw new Error("expected CONFIG_INVALID");
}

describe("kafka.ssl and kafka.sasl configuration", () => {
  it("an unquoted numeric YAML password is refused without echoing it", () => {
    const file = configFile(
      "kafka:\n  sasl: { mechanism: scram-sha-512, username: app, password: 918273645 }\n",
    );
    const message = invalid(() => loadConfig({ configPath: file, env: {} }));
    expect(message).toContain("kafka.sasl.password");
    expect(message).toContain(MASK);
    expect(message).not.toContain("918273645");
  });

  it("a bad tokenCommand is masked in the error and in config print", () => {
    const file = configFile("kafka:\n  sasl: { mechanism: oauthbearer, tokenCommand: 42 }\n");
    expect(invalid(() => loadConfig({ configPath: file, env: {} }))).not.toContain("42 (");
    const ok = loadConfig({
      env: {
        SLUICE_KAFKA__SASL__MECHANISM: "oauthbearer",
        SLUICE_KAFKA__SASL__TOKEN_COMMAND: "get-token --secret s3",
      },
    });
    expect(JSON.stringify(maskSecrets(ok))).not.toContain("s3");
  });

  it("SASL keys that go together: username and exactly one of password / passwordFile", () => {
    expect(invalid(() => loadConfig({ env: { SLUICE_KAFKA__SASL__MECHANISM: "plain" } }))).toMatch(
      /kafka\.sasl\.username.*plain needs kafka\.sasl\.username/s,
    );
    const both = invalid(() =>
      loadConfig({
        env: {
          SLUICE_KAFKA__SASL__MECHANISM: "scram-sha-256",
          SLUICE_KAFKA__SASL__USERNAME: "u",
          SLUICE_KAFKA__SASL__PASSWORD: "p",
          SLUICE_KAFKA__SASL__PASSWORD_FILE: "/run/pw",
        },
      }),
    );
    expect(both).toContain("exactly one of kafka.sasl.password or kafka.sasl.passwordFile");
    expect(invalid(() => loadConfig({ env: { SLUICE_KAFKA__SASL__MECHANISM: "oauthbearer" } }))).toContain(
      "oauthbearer needs exactly one of kafka.sasl.tokenFile or kafka.sasl.tokenCommand",
    );
    const ok = loadConfig({
      env: {
        SLUICE_KAFKA__SASL__MECHANISM: "plain",
        SLUICE_KAFKA__SASL__USERNAME: "u",
        SLUICE_KAFKA__SASL__PASSWORD_FILE: "/run/pw",
      },
    });
    expect(ok.kafka.sasl).toEqual({ mechanism: "plain", username: "u", passwordFile: "/run/pw" });
  });

  it("kafka.ssl is true or an object; certPath and keyPath go together; env takes JSON", () => {
    expect(loadConfig({ env: { SLUICE_KAFKA__SSL: "true" } }).kafka.ssl).toBe(true);
    expect(loadConfig({ env: { SLUICE_KAFKA__SSL: '{"caPath":"/ca.pem"}' } }).kafka.ssl).toEqual({
      caPath: "/ca.pem",
      rejectUnauthorized: true,
    });
    expect(invalid(() => loadConfig({ env: { SLUICE_KAFKA__SSL: '{"certPath":"/c.pem"}' } }))).toContain(
      "mutual TLS needs both kafka.ssl.certPath and kafka.ssl.keyPath",
    );
    expect(invalid(() => loadConfig({ env: { SLUICE_KAFKA__SSL: '{"capath":"/c.pem"}' } }))).toContain(
      "capath",
    );
  });
});
