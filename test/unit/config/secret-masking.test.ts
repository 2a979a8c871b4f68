import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import { MASK, maskSecrets } from "../../../src/config/secret-masking.js";

describe("maskSecrets", () => {
  it("masks kafka.sasl.password and keys named like password/secret/token, not token counts", () => {
    const config = loadConfig({
      env: {
        SLUICE_KAFKA__SASL__MECHANISM: "plain",
        SLUICE_KAFKA__SASL__USERNAME: "svc",
        SLUICE_KAFKA__SASL__PASSWORD: "pw-123",
      },
    });
    const masked = maskSecrets({
      ...config,
      extra: { apiToken: "t", clientSecret: "s", nested: [{ password: "p" }] },
    });
    expect(masked.kafka.sasl).toEqual({ mechanism: "plain", username: "svc", password: MASK });
    expect(masked.extra).toEqual({ apiToken: MASK, clientSecret: MASK, nested: [{ password: MASK }] });
    expect(masked.batching.maxBatchTokens).toBe(8192);
    expect(masked.model.maxSequenceTokens).toBe(256);
    expect(JSON.stringify(masked)).not.toContain("pw-123");
    // The input is left untouched.
    expect(config.kafka.sasl?.password).toBe("pw-123");
  });

  it("masks the schema registry password, keeps the user and the password file path", () => {
    const config = loadConfig({
      env: {
        SLUICE_SCHEMA_REGISTRY__URL: "https://registry.example:8081",
        SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__USER: "svc",
        SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__PASSWORD: "reg-pw-9",
      },
    });
    const masked = maskSecrets(config);
    expect(masked.schemaRegistry.basicAuth).toEqual({ user: "svc", password: MASK });
    expect(JSON.stringify(masked)).not.toContain("reg-pw-9");
    const fromFile = loadConfig({
      env: {
        SLUICE_SCHEMA_REGISTRY__URL: "https://registry.example:8081",
        SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__USER: "svc",
        SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__PASSWORD_FILE: "/run/secrets/registry",
      },
    });
    expect(maskSecrets(fromFile).schemaRegistry.basicAuth).toEqual({
      user: "svc",
      passwordFile: "/run/secrets/registry",
    });
  });
});
