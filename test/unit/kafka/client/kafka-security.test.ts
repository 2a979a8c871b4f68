import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../../src/config/config-loader.js";
import { jwtExpiryMs, kafkaSecurityOptions } from "../../../../src/kafka/client/kafka-security.js";
import { isSluiceError } from "../../../../src/sluice-error.js";

const dir = mkdtempSync(join(tmpdir(), "sluice-security-"));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const jwt = (exp: number) => `h.${Buffer.from(JSON.stringify({ exp })).toString("base64url")}.sig`;

describe("kafkaSecurityOptions", () => {
  it("reads CA, client certificate, key and key passphrase from their files", () => {
    const ssl = {
      caPath: file("ca.pem", "CA"),
      certPath: file("c.pem", "CERT"),
      keyPath: file("k.pem", "KEY"),
      keyPasswordFile: file("kp", "phrase\n"),
      servername: "kafka.example",
      rejectUnauthorized: true,
    };
    expect(kafkaSecurityOptions({ ssl }).ssl).toEqual({
      ca: ["CA"],
      cert: "CERT",
      key: "KEY",
      passphrase: "phrase",
      servername: "kafka.example",
      rejectUnauthorized: true,
    });
  });

  it("takes the SASL password from passwordFile (first line)", () => {
    const sasl = {
      mechanism: "scram-sha-512" as const,
      username: "app",
      passwordFile: file("pw", "s3cret\n"),
    };
    expect(kafkaSecurityOptions({ ssl: false, sasl }).sasl).toEqual({
      mechanism: "scram-sha-512",
      username: "app",
      password: "s3cret",
    });
  });

  it("a missing file is CONFIG_INVALID naming the key and path, never a secret", () => {
    try {
      kafkaSecurityOptions({ ssl: { caPath: join(dir, "nope.pem"), rejectUnauthorized: true } });
      expect.unreachable();
    } catch (error) {
      expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
      expect((error as Error).message).toMatch(/kafka\.ssl\.caPath: cannot read .*nope\.pem \(ENOENT\)/);
    }
  });

  it("oauthbearer: the token file is re-read once the token's exp is near, not before", async () => {
    const tokenFile = join(dir, "token");
    writeFileSync(tokenFile, jwt(Math.floor(Date.now() / 1000) + 3600));
    const config = loadConfig({
      env: { SLUICE_KAFKA__SASL__MECHANISM: "oauthbearer", SLUICE_KAFKA__SASL__TOKEN_FILE: tokenFile },
    });
    const sasl = kafkaSecurityOptions(config.kafka).sasl as {
      oauthBearerProvider: () => Promise<{ value: string }>;
    };
    const first = (await sasl.oauthBearerProvider()).value;
    writeFileSync(tokenFile, "rotated");
    expect((await sasl.oauthBearerProvider()).value).toBe(first);

    // An expired token is replaced by what the file holds now.
    writeFileSync(tokenFile, jwt(Math.floor(Date.now() / 1000) - 10));
    const expiring = kafkaSecurityOptions(config.kafka).sasl as typeof sasl;
    await expiring.oauthBearerProvider();
    writeFileSync(tokenFile, "rotated");
    expect((await expiring.oauthBearerProvider()).value).toBe("rotated");
  });

  it("oauthbearer: a token command's output is the token; a failing one says so without echoing it", async () => {
    const ok = loadConfig({
      env: { SLUICE_KAFKA__SASL__MECHANISM: "oauthbearer", SLUICE_KAFKA__SASL__TOKEN_COMMAND: "echo tok-1" },
    });
    const provider = (
      kafkaSecurityOptions(ok.kafka).sasl as { oauthBearerProvider: () => Promise<{ value: string }> }
    ).oauthBearerProvider;
    expect((await provider()).value).toBe("tok-1");
    const bad = loadConfig({
      env: {
        SLUICE_KAFKA__SASL__MECHANISM: "oauthbearer",
        SLUICE_KAFKA__SASL__TOKEN_COMMAND: "exit 3 # --secret xyz",
      },
    });
    const failing = (kafkaSecurityOptions(bad.kafka).sasl as { oauthBearerProvider: () => Promise<unknown> })
      .oauthBearerProvider;
    await expect(failing()).rejects.toThrow(/tokenCommand failed \(exit code 3\)/);
    await expect(failing()).rejects.not.toThrow(/xyz/);
  });

  it("jwtExpiryMs reads exp, and gives undefined for opaque tokens", () => {
    expect(jwtExpiryMs(jwt(1700000000))).toBe(1700000000 * 1000);
    expect(jwtExpiryMs("opaque-token")).toBeUndefined();
  });
});
