import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../../src/config/project-paths.js";
import { LocalBroker } from "../../src/devtools/local-broker.js";
import { SecureBrokerLayout } from "../../src/devtools/secure-broker.js";
import { buildDist } from "../support/built-cli.js";
import { SECURE_KAFKA_ENV, type SecureKafka } from "./secure-harness.js";

/**
 * Global setup of `npm run test:secure`: one secured local broker (SASL_SSL + SCRAM-SHA-512, mutual-TLS
 * listener, self-signed CA, StandardAuthorizer, no access without an ACL) on free ports in a temp run
 * folder, stopped and removed afterwards. Test workers read its address and credentials from the
 * environment they inherit (secureKafka()). dist/, which the CLI tests run, is built meanwhile.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const building = buildDist();
  building.catch(() => undefined); // awaited below, after the broker started
  const runDir = mkdtempSync(join(tmpdir(), "sluice-secure-kafka-"));
  const layout = new SecureBrokerLayout(runDir);
  const broker = new LocalBroker({
    runDir,
    port: 0,
    heapMb: 768,
    listeners: layout,
    classpathCacheDir: join(packageRoot(), ".sluice", "cache"),
    onProgress: (message) => console.log(`[secure kafka] ${message}`),
  });
  const started = Date.now();
  const status = await broker.start().catch(async (error: unknown) => {
    await building.catch(() => undefined);
    throw error;
  });
  const credentials = layout.describe();
  if (!credentials || !status.bootstrap) throw new Error("secured broker started without credentials");
  const info: SecureKafka = { bootstrap: status.bootstrap, runDir, ...credentials };
  process.env[SECURE_KAFKA_ENV] = JSON.stringify(info);
  console.log(
    `[secure kafka] ready on ${status.bootstrap} in ${Date.now() - started} ms (run folder ${runDir})`,
  );
  try {
    await building;
  } catch (error) {
    await broker.stop();
    rmSync(runDir, { recursive: true, force: true });
    throw error;
  }
  return async () => {
    await broker.stop();
    rmSync(runDir, { recursive: true, force: true });
  };
}
