import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SchemaRegistry } from "@kafkajs/confluent-schema-registry";
import { packageRoot } from "../../src/config/project-paths.js";
import { LocalRegistry } from "../../src/devtools/local-registry.js";

/**
 * A real Apicurio Registry for one test file (started in `beforeAll`, ~3-6 s), the same one
 * `sluice registry start` runs, in a temp run folder; the distribution is cached under
 * `.sluice/cache` so only the first run on a machine fetches it. `stop()`/`start()` make an outage on
 * the same port; its storage is a file in the run folder, so schemas and ids survive it.
 */
export interface TestRegistry {
  /** `schemaRegistry.url` for Sluice. */
  url: string;
  /** A client for producers and subscribers in the test (the standard serializer/deserializer). */
  client(): SchemaRegistry;
  stop(): Promise<void>;
  /** Starts it again on the same port, with the schemas it had. */
  start(): Promise<void>;
  /** Stops it and removes its run folder. */
  dispose(): Promise<void>;
}

export async function startTestRegistry(
  options: { tls?: { certPath: string; keyPath: string; caPath: string } } = {},
): Promise<TestRegistry> {
  const runDir = mkdtempSync(join(tmpdir(), "sluice-test-registry-"));
  const cacheDir = join(packageRoot(), ".sluice", "cache");
  const onProgress = (message: string) => console.log(`[test registry] ${message}`);
  const common = { runDir, cacheDir, onProgress, ...(options.tls ? { tls: options.tls } : {}) };
  const first = await new LocalRegistry({ ...common, port: 0 }).start();
  const port = first.port as number;
  const registry = new LocalRegistry({ ...common, port });
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

/** A throwaway CA, a server certificate it signed for 127.0.0.1, and an unrelated second CA (openssl). */
export interface TestPki {
  caPath: string;
  certPath: string;
  keyPath: string;
  otherCaPath: string;
}

export function createTestPki(dir: string): TestPki {
  const p = (name: string) => join(dir, name);
  const openssl = (args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
  const selfSigned = (name: string) =>
    openssl([
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      `/CN=${name}`,
      "-keyout",
      p(`${name}.key`),
      "-out",
      p(`${name}.pem`),
    ]);
  selfSigned("sluice-test-ca");
  selfSigned("sluice-other-ca");
  openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=127.0.0.1",
    "-keyout",
    p("server.key"),
    "-out",
    p("server.csr"),
  ]);
  writeFileSync(p("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  openssl([
    "x509",
    "-req",
    "-in",
    p("server.csr"),
    "-CA",
    p("sluice-test-ca.pem"),
    "-CAkey",
    p("sluice-test-ca.key"),
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    p("san.ext"),
    "-out",
    p("server.pem"),
  ]);
  return {
    caPath: p("sluice-test-ca.pem"),
    certPath: p("server.pem"),
    keyPath: p("server.key"),
    otherCaPath: p("sluice-other-ca.pem"),
  };
}
