import { describe, expect, it } from "vitest";
import type { AclEntry } from "../../src/app/kafka-acl-plan.js";
import { startServeRuntime } from "../../src/app/serve-runtime.js";
import { loadConfig } from "../../src/config/config-loader.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { createLogger } from "../../src/observability/logger.js";
import {
  aclsFor,
  createServeTopics,
  grant,
  produceAsAdmin,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// While a runtime stopped by a refusal has not exited, /readyz says why (in-process, so the test
// reads it between the failure and the close instead of racing the process exit).
describe("serve runtime refused by an ACL", () => {
  it("/readyz answers 503 with the AUTHORIZATION_FAILED reason until closed", async () => {
    const base = uniqueBase("readyz");
    const config = writeConfig(base);
    await createServeTopics(base);
    const freshness = `${base}.freshness`;
    const plan = await aclsFor(config, ["--command", "serve"]);
    // DESCRIBE but no WRITE on the freshness topic: start-up passes, the first heartbeat is refused.
    const describeOnly: AclEntry = {
      resourceType: "TOPIC",
      patternType: "LITERAL",
      name: freshness,
      operation: "DESCRIBE",
      commands: [],
      why: "",
    };
    await grant(
      [...plan.filter((e) => e.name !== freshness), describeOnly],
      `User:${secureKafka().app.username}`,
    );
    await produceAsAdmin(`${base}.requests`, [
      { key: "r", ...encodeRequest({ id: "r", text: "ready?" }, "json") },
    ]);

    const runtime = await startServeRuntime(
      loadConfig({ configPath: config.path, env: {} }),
      createLogger({ level: "silent" }),
    );
    try {
      const failure = await runtime.fatal;
      expect(failure.code).toBe("AUTHORIZATION_FAILED");
      expect(failure.message).toContain(`WRITE on TOPIC "${freshness}"`);
      const response = await fetch(`${runtime.metricsUrl}/readyz`);
      expect(response.status).toBe(503);
      const body = await response.text();
      expect(body).toContain("AUTHORIZATION_FAILED");
      expect(body).toContain(freshness);
    } finally {
      await runtime.close();
    }
  });
});
