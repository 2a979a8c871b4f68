import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SchemaRegistry } from "@kafkajs/confluent-schema-registry";
import { packageRoot } from "../../src/config/project-paths.js";
import { LocalRegistry } from "../../src/devtools/local-registry.js";

/**
 * A real Apicurio Registry for one test file (started in `beforeAll`, ~3-6 s), the same one
 * `sluice registry start` runs, in a temp run folder; the distribution is cached under
 * `.sluice/cache` so only the first run on a machine fetches it. `stop()`/`start()` simulate an
 * outage on the same port (in-memory storage: a restarted registry is empty).
 */
export interface TestRegistry {
  /** `schemaRegistry.url` for Sluice. */
  url: string;
  /** A client for producers and subscribers in the test (the standard serializer/deserializer). */
  client(): SchemaRegistry;
  stop(): Promise<void>;
  /** Starts it again on the same port (empty). */
  start(): Promise<void>;
  /** Stops it and removes its run folder. */
  dispose(): Promise<void>;
}

export async function startTestRegistry(): Promise<TestRegistry> {
  const runDir = mkdtempSync(join(tmpdir(), "sluice-test-registry-"));
  const cacheDir = join(packageRoot(), ".sluice", "cache");
  const onProgress = (message: string) => console.log(`[test registry] ${message}`);
  const first = await new LocalRegistry({ runDir, port: 0, cacheDir, onProgress }).start();
  const port = first.port as number;
  const registry = new LocalRegistry({ runDir, port, cacheDir, onProgress });
  const url = first.url as string;
  return {
    url,
    client: () => new SchemaRegistry({ host: url, retry: { retries: 0 } }),
    stop: async () => void (await registry.stop()),
    start: async () => {
      const status = await registry.start();
      if (status.port !== port) throw new Error(`registry came back on port ${status.port}, not ${port}`);
    },
    dispose: async () => {
      await registry.stop();
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}
