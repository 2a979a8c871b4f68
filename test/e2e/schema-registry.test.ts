import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SchemaRegistry } from "@kafkajs/confluent-schema-registry";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createWireCodecs } from "../../src/app/wire-codecs.js";
import { type SluiceConfigInput, sluiceConfigSchema } from "../../src/config/config-schema.js";
import { loadSchema } from "../../src/contracts/avro-schemas.js";
import type { InferenceResult } from "../../src/contracts/inference.js";
import { parseRegistryFrame } from "../../src/contracts/registry-wire.js";
import { isSluiceError } from "../../src/sluice-error.js";
import { runCli } from "../support/cli-process.js";
import { createTopics, produceMessages, testBrokers, uniqueName } from "../support/kafka-harness.js";
import { PING, TICKET_V1, TICKET_V2 } from "../support/registry-fixtures.js";
import { createTestPki, startTestRegistry, type TestRegistry } from "../support/registry-harness.js";
import {
  killLeftovers,
  type ReadRecord,
  readCommitted,
  type ServeProcess,
  serveEnv,
  startServe,
} from "../support/serve-process.js";
import { createTinyModel, TINY_HIDDEN, tinyModelConfigYaml, tinyModelEnv } from "../support/tiny-onnx.js";

// Issue 14 end to end: a real Apicurio Registry (the one `sluice registry start` runs), a real broker,
// the real `sluice serve` / `sluice batch` processes. Producers and subscribers use the standard
// client library's serializer (`encode`) and deserializer (`decode`), as a Kafka shop's apps would.

const SAMPLE_RESULT: InferenceResult = {
  id: "r",
  status: "expired",
  output: null,
  model: { name: "m", version: "v" },
  source: { topic: "t", partition: 0, offset: "0" },
  timing: { requestTimestamp: 0, queueMs: 0, inferenceMs: 0, batchSize: 1, completedAt: 0 },
  attributes: null,
  truncated: false,
  error: { code: "DEADLINE_EXCEEDED", message: "late" },
};

let registry: TestRegistry;
let client: SchemaRegistry;
let dir: string;
let modelEnv: Record<string, string>;
let configPath: string;
const procs: ServeProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "sluice-registry-e2e-"));
  const tiny = await createTinyModel(dir, { task: "embedding" });
  modelEnv = tinyModelEnv(tiny);
  configPath = join(dir, "sluice.yaml");
  await writeFile(configPath, tinyModelConfigYaml(tiny));
  registry = await startTestRegistry();
  client = registry.client();
}, 180_000);
afterEach(() => killLeftovers(procs));
afterAll(async () => {
  await registry?.dispose();
  await rm(dir, { recursive: true, force: true });
});

function registryEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    SLUICE_TOPICS__REQUEST_CODEC: "avro-registry",
    SLUICE_TOPICS__RESULT_CODEC: "avro-registry",
    SLUICE_SCHEMA_REGISTRY__URL: registry.url,
    SLUICE_SCHEMA_REGISTRY__RETRY_INITIAL_MS: "200",
    SLUICE_SCHEMA_REGISTRY__RETRY_MAX_MS: "1000",
    ...extra,
  };
}

function serve(base: string): ServeProcess {
  const p = startServe([], serveEnv(base, { ...modelEnv, ...registryEnv() }));
  procs.push(p);
  return p;
}

async function stop(p: ServeProcess): Promise<void> {
  p.child.kill("SIGTERM");
  const { code } = await p.exited;
  expect(code, p.output().slice(-3000)).toBe(0);
}

const register = async (schema: unknown, subject: string) =>
  (await client.register(schema as never, { subject })).id;

async function decodeAll(records: ReadRecord[]): Promise<InferenceResult[]> {
  return Promise.all(records.map((r) => client.decode(r.value as Buffer) as Promise<InferenceResult>));
}

function configWith(input: SluiceConfigInput) {
  return sluiceConfigSchema.parse(input);
}

describe("avro-registry codec against a real schema registry", () => {
  it("round trip: standard serializer → sluice serve → standard deserializer; extra fields, an evolved writer, bad input", async () => {
    const base = uniqueName("reg-serve");
    await createTopics([{ topic: `${base}.requests`, numPartitions: 2 }]);
    const v1 = await register(TICKET_V1, `${base}.requests-value`);
    const v2 = await register(TICKET_V2, `${base}.requests-value`);
    const own = await register(loadSchema("inference-request"), `${base}.own-value`);
    const ping = await register(PING, `${base}.ping-value`);
    expect(new Set([v1, v2, own, ping]).size).toBe(4);

    const p = serve(base);
    await p.waitFor(/sluice serve running/);
    // The result schema is registered under TopicNameStrategy at start-up.
    const resultId = await client.getLatestSchemaId(`${base}.results-value`);

    const good = [
      { key: "t1", value: await client.encode(v1, { id: "t1", priority: 1, text: "hello world" }) },
      {
        key: "t2",
        value: await client.encode(v2, { id: "t2", priority: 2, text: "good day", channel: "mail" }),
      },
      {
        key: "t3",
        value: await client.encode(own, {
          id: "t3",
          text: "hello",
          deadlineMs: null,
          attributes: { a: "b" },
        }),
      },
    ];
    const bad = [
      { key: "magic", value: Buffer.from([1, 0, 0, 0, v1, 2, 97]) },
      { key: "unknown", value: Buffer.concat([Buffer.from([0, 0, 0, 0x7f, 0x7f]), Buffer.from([2, 97])]) },
      { key: "ping", value: await client.encode(ping, { id: "ping" }) },
    ];
    await produceMessages(`${base}.requests`, [...good, ...bad]);

    const results = await readCommitted(`${base}.results`, { expected: 3, stopWriters: () => stop(p) });
    const decoded = await decodeAll(results);
    expect(decoded.map((r) => r.id).sort()).toEqual(["t1", "t2", "t3"]);
    for (const r of results) {
      const frame = parseRegistryFrame(r.value as Buffer);
      expect(frame.ok && frame.schemaId).toBe(resultId);
    }
    for (const r of decoded) {
      expect(r.status).toBe("ok");
      expect(r.output?.embedding).toHaveLength(TINY_HIDDEN);
    }
    expect(decoded.find((r) => r.id === "t3")?.attributes).toEqual({ a: "b" });

    const dead = await readCommitted(`${base}.dlq`, { expected: 3 });
    const codes = Object.fromEntries(
      dead.map((d) => [d.key, String(d.headers["sluice.error.code"])] as const),
    );
    expect(codes).toEqual({
      magic: "WRONG_MAGIC_BYTE",
      unknown: "UNKNOWN_SCHEMA_ID",
      ping: "SCHEMA_UNRESOLVABLE",
    });
    for (const d of dead) expect(String(d.headers["sluice.error.stage"])).toBe("decode");
    // Dead letters keep the raw value byte for byte (replayable).
    expect(dead.find((d) => d.key === "ping")?.value).toEqual(bad[2]?.value);
  }, 120_000);

  it("registry outage: known schema ids keep flowing, a new id waits (not lost, not dead-lettered) until the registry is back", async () => {
    const base = uniqueName("reg-outage");
    const requests = `${base}.requests`;
    await createTopics([{ topic: requests, numPartitions: 2 }]);
    const p = serve(base);
    await p.waitFor(/sluice serve running/);
    const known = await register(TICKET_V1, `${requests}-value`);
    const fresh = await register(TICKET_V2, `${requests}-value`);
    const send = async (partition: number, schemaId: number, ids: string[]) =>
      produceMessages(
        requests,
        await Promise.all(
          ids.map(async (id) => ({
            key: id,
            partition,
            value: await client.encode(schemaId, { id, priority: 1, text: "hello", channel: "x" }),
          })),
        ),
      );
    // Sluice learns the known id while the registry is up.
    await send(0, known, ["k0"]);
    expect((await readCommitted(`${base}.results`, { expected: 1 })).length).toBe(1);

    await registry.stop();
    await send(1, fresh, ["n1", "n2", "n3"]);
    await send(0, known, ["k1", "k2", "k3"]);
    await p.waitFor(/schema registry lookup failed/);
    // Known-id traffic (partition 0) is not stalled by the outage...
    const during = await readCommitted(`${base}.results`, { expected: 4 });
    const duringIds = during.map((r) => r.key).sort();
    expect(duringIds).toEqual(["k0", "k1", "k2", "k3"]);
    // ...and the new-id records wait: no result and no dead letter for them.
    expect(await readCommitted(`${base}.dlq`, { expected: 0, timeoutMs: 1000 })).toEqual([]);

    // The registry comes back (with its schemas: its storage outlives the process).
    await registry.start();
    await p.waitFor(/schema registry lookup succeeded/, 30_000);
    const all = await readCommitted(`${base}.results`, { expected: 7, stopWriters: () => stop(p) });
    expect(all.map((r) => r.key).sort(), p.output().slice(-6000)).toEqual([
      "k0",
      "k1",
      "k2",
      "k3",
      "n1",
      "n2",
      "n3",
    ]);
    expect((await decodeAll(all)).every((r) => r.status === "ok")).toBe(true);
    expect(await readCommitted(`${base}.dlq`, { expected: 0, timeoutMs: 1000 })).toEqual([]);
  }, 120_000);

  it("sluice batch kafka → kafka uses the same codec (inputs decoded, outputs registered and framed)", async () => {
    const input = uniqueName("reg-bin");
    const output = uniqueName("reg-bout");
    await createTopics([{ topic: input }, { topic: output }]);
    const v1 = await register(TICKET_V1, `${input}-value`);
    const ids = ["b1", "b2", "b3", "b4"];
    await produceMessages(
      input,
      await Promise.all(
        ids.map(async (id) => ({
          key: id,
          value: await client.encode(v1, { id, priority: 0, text: "good" }),
        })),
      ),
    );
    const run = await runCli(
      [
        "-c",
        configPath,
        "batch",
        "-i",
        `kafka:${input}`,
        "-o",
        `kafka:${output}`,
        "--state-dir",
        join(dir, input),
      ],
      { KAFKA_BROKERS: testBrokers().join(","), ...registryEnv() },
    );
    expect(run.code, run.stderr).toBe(0);
    const outputId = await client.getLatestSchemaId(`${output}-value`);
    const records = await readCommitted(output, { expected: 4 });
    expect(records.every((r) => parseRegistryFrame(r.value as Buffer).ok)).toBe(true);
    expect(records.every((r) => registryIdOf(r) === outputId)).toBe(true);
    const decoded = await decodeAll(records);
    expect(decoded.map((r) => r.id).sort()).toEqual(ids);
  }, 120_000);

  it("backfill results in their own topic are framed with that topic's subject, with runId", async () => {
    const base = uniqueName("reg-bf");
    const lanes = {
      SLUICE_TOPICS__BACKFILL: `${base}.backfill`,
      SLUICE_TOPICS__BACKFILL_RESULTS: `${base}.embeddings`,
      SLUICE_TOPICS__RUNS: `${base}.runs`,
    };
    const p = startServe([], serveEnv(base, { ...modelEnv, ...registryEnv(), ...lanes }));
    procs.push(p);
    await p.waitFor(/sluice serve running/);
    // Registered (and BACKWARD-checked) at start-up under the backfill results topic's own subject.
    const backfillId = await client.getLatestSchemaId(`${base}.embeddings-value`);
    const rows = join(dir, `${base}.jsonl`);
    const ids = ["r1", "r2", "r3", "r4", "r5"];
    await writeFile(rows, ids.map((id) => JSON.stringify({ id, text: `row ${id}` })).join("\n"));
    const submit = await runCli(
      ["-c", configPath, "backfill", "submit", "--input", rows, "--run-id", "reg-run"],
      serveEnv(base, { ...modelEnv, ...registryEnv(), ...lanes }),
    );
    expect(submit.code, submit.stderr).toBe(0);
    const records = await readCommitted(`${base}.embeddings`, {
      expected: ids.length,
      stopWriters: () => stop(p),
    });
    expect(records.every((r) => registryIdOf(r) === backfillId)).toBe(true);
    const decoded = await decodeAll(records);
    expect(decoded.map((r) => r.id).sort()).toEqual(ids);
    for (const r of decoded) expect(r).toMatchObject({ status: "ok", runId: "reg-run" });
  }, 120_000);

  it("start-up: an unreachable registry names the URL and the cause, never the password", async () => {
    const canary = `pw-${uniqueName("c")}`;
    const url = "http://127.0.0.1:1/apis/ccompat/v7";
    const error = await createWireCodecs(
      configWith({
        topics: { resultCodec: "avro-registry" },
        schemaRegistry: { url, basicAuth: { user: "u", password: canary }, requestTimeoutMs: 2000 },
      }),
    ).catch((e: unknown) => e);
    expect(isSluiceError(error, "REGISTRY_UNAVAILABLE")).toBe(true);
    const message = (error as Error).message;
    expect(message).toContain(url);
    expect(message).toMatch(/ECONNREFUSED/);
    expect(message).not.toContain(canary);
    // The same for `sluice serve`: a clear start-up error and a non-zero exit.
    const cli = await runCli(["-c", configPath, "serve"], {
      KAFKA_BROKERS: testBrokers().join(","),
      ...registryEnv({ SLUICE_SCHEMA_REGISTRY__URL: url, SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__USER: "u" }),
      SLUICE_SCHEMA_REGISTRY__BASIC_AUTH__PASSWORD: canary,
    });
    expect(cli.code).not.toBe(0);
    expect(cli.stderr).toContain("REGISTRY_UNAVAILABLE");
    expect(cli.stderr).toContain(url);
    expect(cli.stderr + cli.stdout).not.toContain(canary);
  }, 60_000);

  it("start-up: a TLS problem and an unreadable CA file are reported with the key to fix", async () => {
    const httpsUrl = registry.url.replace("http://", "https://");
    const tls = await createWireCodecs(
      configWith({ topics: { requestCodec: "avro-registry" }, schemaRegistry: { url: httpsUrl } }),
    ).catch((e: unknown) => e);
    expect(isSluiceError(tls, "REGISTRY_UNAVAILABLE")).toBe(true);
    expect((tls as Error).message).toContain(httpsUrl);
    const missingCa = await createWireCodecs(
      configWith({
        topics: { requestCodec: "avro-registry" },
        schemaRegistry: { url: httpsUrl, caPath: join(dir, "no-such-ca.pem") },
      }),
    ).catch((e: unknown) => e);
    expect(isSluiceError(missingCa, "CONFIG_INVALID")).toBe(true);
    expect((missingCa as Error).message).toContain("schemaRegistry.caPath");
  });

  it("start-up over TLS: the registry's CA in caPath connects, a wrong CA fails naming the URL and caPath", async () => {
    const pki = createTestPki(dir);
    const tlsRegistry = await startTestRegistry({ tls: pki });
    try {
      expect(tlsRegistry.url.startsWith("https://")).toBe(true);
      const topic = uniqueName("reg-tls");
      const trusted = await createWireCodecs(
        configWith({
          topics: { resultCodec: "avro-registry" },
          schemaRegistry: { url: tlsRegistry.url, caPath: pki.caPath },
        }),
      );
      // Registers the result schema over TLS.
      const encoder = await trusted.resultEncoder(topic);
      expect(parseRegistryFrame(encoder.encode(SAMPLE_RESULT).value).ok).toBe(true);
      const wrongCa = await createWireCodecs(
        configWith({
          topics: { resultCodec: "avro-registry" },
          schemaRegistry: { url: tlsRegistry.url, caPath: pki.otherCaPath },
        }),
      ).catch((e: unknown) => e);
      expect(isSluiceError(wrongCa, "REGISTRY_UNAVAILABLE")).toBe(true);
      expect((wrongCa as Error).message).toContain(tlsRegistry.url);
      expect((wrongCa as Error).message).toContain("schemaRegistry.caPath");
    } finally {
      await tlsRegistry.dispose();
    }
  }, 120_000);

  it("sluice registry status reports a run folder without a registry as not running (exit 3)", async () => {
    const home = join(dir, "no-registry");
    const status = await runCli(["registry", "status", "--home", home, "--json"]);
    expect(status.code).toBe(3);
    expect(JSON.parse(status.stdout)).toMatchObject({ running: false, runDir: home });
  });

  it("start-up: a results subject the result schema is not BACKWARD compatible with fails clearly", async () => {
    const topic = uniqueName("reg-incompat");
    await register(
      { type: "record", name: "Other", namespace: "x", fields: [{ name: "x", type: "int" }] },
      `${topic}-value`,
    );
    const wire = await createWireCodecs(
      configWith({ topics: { resultCodec: "avro-registry" }, schemaRegistry: { url: registry.url } }),
    );
    const error = await wire.resultEncoder(topic).catch((e: unknown) => e);
    expect(isSluiceError(error, "SCHEMA_INCOMPATIBLE")).toBe(true);
    expect((error as Error).message).toContain(`${topic}-value`);
    expect((error as Error).message).toContain("BACKWARD");
  });

  it("RecordNameStrategy registers the result schema under its record name; re-registering is idempotent", async () => {
    const config = configWith({
      topics: { resultCodec: "avro-registry" },
      schemaRegistry: { url: registry.url, subjectNameStrategy: "RecordNameStrategy" },
    });
    const encoderA = await (await createWireCodecs(config)).resultEncoder(uniqueName("a"));
    const encoderB = await (await createWireCodecs(config)).resultEncoder(uniqueName("b"));
    const id = await client.getLatestSchemaId("dev.sluice.InferenceResult");
    for (const encoder of [encoderA, encoderB]) {
      const value = encoder.encode(SAMPLE_RESULT).value;
      expect(parseRegistryFrame(value)).toMatchObject({ ok: true, schemaId: id });
      expect(await client.decode(value)).toMatchObject({ id: "r", status: "expired" });
    }
  });
});

function registryIdOf(r: ReadRecord): number | undefined {
  const frame = parseRegistryFrame(r.value as Buffer);
  return frame.ok ? frame.schemaId : undefined;
}
