import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig, loadConfigWithOrigin } from "../../../src/config/config-loader.js";
import { maxBatchSize, sluiceConfigSchema } from "../../../src/config/config-schema.js";
import { isSluiceError, type SluiceError } from "../../../src/sluice-error.js";

const dir = mkdtempSync(join(tmpdir(), "sluice-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function failure(fn: () => unknown): SluiceError {
  try {
    fn();
  } catch (error) {
    if (isSluiceError(error, "CONFIG_INVALID")) return error;
    throw error;
  }
  throw new Error("expected CONFIG_INVALID");
}

describe("loadConfig", () => {
  it("missing default file = documented defaults", () => {
    const config = loadConfig({ env: {}, cwd: dir });
    expect(config.kafka.brokers).toEqual(["127.0.0.1:19092"]);
    expect(config.topics.requests).toEqual(["sluice.requests"]);
    expect(config.batching).toEqual({
      maxBatchSize: "auto",
      maxBatchTokens: 8192,
      maxWaitMs: 10,
      maxInFlightBatches: 2,
      maxQueuedRecords: 8000,
      bucketing: true,
    });
    expect(config.delivery.commitIntervalMs).toBe(100);
    expect(config.model).toMatchObject({ name: "bge-small-en-v1.5-q", pooling: "cls", task: "embedding" });
    expect(config.model.path).toBeUndefined();
    expect(config.observability.instanceId).toMatch(new RegExp(`-${process.pid}$`));
    expect(config.batch).toEqual({ shardSize: 10_000, idField: "id", textField: "text" });
  });

  it("reads sluice.config.yaml from cwd and layers env over file", () => {
    const cwd = mkdtempSync(join(dir, "cwd-"));
    writeFileSync(
      join(cwd, "sluice.config.yaml"),
      "batching:\n  maxBatchSize: 8\n  maxWaitMs: 3\ntopics:\n  requestCodec: avro\n",
    );
    const { config, origin } = loadConfigWithOrigin({ cwd, env: { SLUICE_BATCHING__MAX_WAIT_MS: "20" } });
    expect(config.batching.maxBatchSize).toBe(8);
    expect(config.batching.maxWaitMs).toBe(20);
    expect(config.topics.requestCodec).toBe("avro");
    expect(origin.file).toBe(join(cwd, "sluice.config.yaml"));
    expect(origin.env.get("batching.maxWaitMs")).toContain("SLUICE_BATCHING__MAX_WAIT_MS");
  });

  it("SLUICE_CONFIG names the file; an explicitly named missing file is an error", () => {
    const path = file("explicit.yaml", "consumer:\n  groupId: from-file\n");
    expect(loadConfig({ env: { SLUICE_CONFIG: path } }).consumer.groupId).toBe("from-file");
    const error = failure(() => loadConfig({ env: {}, configPath: join(dir, "nope.yaml") }));
    expect(error.message).toContain("does not exist");
  });

  it("an empty file is all defaults", () => {
    expect(loadConfig({ env: {}, configPath: file("empty.yaml", "") }).batching.maxBatchSize).toBe("auto");
  });

  it("batching.maxBatchSize auto: 32 rows for a text model, 256 for a tensor model", () => {
    const text = loadConfig({ env: {}, configPath: file("text.yaml", "") });
    expect(maxBatchSize(text.batching, text.model.task)).toBe(32);
    const tensorYaml =
      "model:\n  task: tensor\n  path: /m/model.onnx\ntopics:\n  requestCodec: v2-json\n  resultCodec: v2-json\n";
    const tensor = loadConfig({ env: {}, configPath: file("tensor.yaml", tensorYaml) });
    expect(maxBatchSize(tensor.batching, tensor.model.task)).toBe(256);
    const set = loadConfig({
      env: { SLUICE_BATCHING__MAX_BATCH_SIZE: "64" },
      configPath: file("t2.yaml", tensorYaml),
    });
    expect(maxBatchSize(set.batching, set.model.task)).toBe(64);
    const error = failure(() =>
      loadConfig({
        env: { SLUICE_BATCHING__MAX_QUEUED_RECORDS: "100" },
        configPath: file("t3.yaml", tensorYaml),
      }),
    );
    expect(error.message).toContain(
      "must be at least batching.maxBatchSize (256, auto for model.task tensor)",
    );
  });

  it("overrides win over env and file", () => {
    const path = file("o.yaml", "batching:\n  maxBatchSize: 8\n");
    const config = loadConfig({
      configPath: path,
      env: { SLUICE_BATCHING__MAX_BATCH_SIZE: "9" },
      overrides: { batching: { maxBatchSize: 10 } },
    });
    expect(config.batching.maxBatchSize).toBe(10);
  });

  it("an invalid value names key, value, source and rule", () => {
    const path = file("bad.yaml", "batching:\n  maxBatchSize: 5000\n");
    const error = failure(() => loadConfig({ env: {}, configPath: path }));
    expect(error.message).toContain("batching.maxBatchSize = 5000");
    expect(error.message).toContain(`from ${path}`);
    expect(error.message).toContain("<=4096");
  });

  it("reports every problem at once", () => {
    const path = file("two.yaml", "batching:\n  maxBatchSize: 0\ntopics:\n  requestCodec: xml\n");
    const error = failure(() => loadConfig({ env: {}, configPath: path }));
    expect(error.message).toContain("2 problems");
    expect(error.message).toContain("batching.maxBatchSize = 0");
    expect(error.message).toContain('topics.requestCodec = "xml"');
    expect(error.message).toContain('"json"|"avro"');
  });

  it("an unknown key in the file is an error listing the allowed keys", () => {
    const path = file("typo.yaml", "batching:\n  maxBatchSise: 8\n");
    const error = failure(() => loadConfig({ env: {}, configPath: path }));
    expect(error.message).toContain("batching.maxBatchSise: unknown key");
    expect(error.message).toContain("maxBatchSize");
  });

  it("invalid YAML and a non-mapping document are clear errors", () => {
    expect(
      failure(() => loadConfig({ env: {}, configPath: file("broken.yaml", "a: [1,\n") })).message,
    ).toContain("not valid YAML");
    expect(failure(() => loadConfig({ env: {}, configPath: file("list.yaml", "- 1\n") })).message).toContain(
      "YAML mapping",
    );
  });

  it("cross-field rules name both keys", () => {
    const heartbeat = failure(() =>
      loadConfig({
        env: { SLUICE_CONSUMER__HEARTBEAT_INTERVAL_MS: "30000" },
        configPath: file("x.yaml", ""),
      }),
    );
    expect(heartbeat.message).toContain("consumer.heartbeatIntervalMs = 30000");
    expect(heartbeat.message).toContain("consumer.sessionTimeoutMs");

    const loop = failure(() =>
      loadConfig({ env: {}, overrides: { topics: { requests: ["in"], results: "in" } } }),
    );
    expect(loop.message).toContain('topics.results = "in"');

    const tokens = failure(() => loadConfig({ env: {}, overrides: { batching: { maxBatchTokens: 100 } } }));
    expect(tokens.message).toContain("model.maxSequenceTokens");
  });

  it("a cross-field rule that fails on a default shows the default's value, not (missing)", () => {
    const error = failure(() => loadConfig({ env: { SLUICE_CONSUMER__SESSION_TIMEOUT_MS: "2000" } }));
    expect(error.message).toContain(
      "consumer.heartbeatIntervalMs = 3000 (default): must be below consumer.sessionTimeoutMs (2000)",
    );
    expect(error.message).not.toContain("(missing)");
  });

  it("a fraction for an integer key reads 'must be an integer'", () => {
    for (const variable of ["SLUICE_BATCHING__MAX_BATCH_SIZE", "SLUICE_KAFKA__CONNECTION_TIMEOUT_MS"]) {
      const error = failure(() => loadConfig({ env: { [variable]: "1.5" } }));
      expect(error.message).toMatch(/= 1\.5 \(from environment variable \w+\): must be an integer \[/);
      expect(error.message).not.toContain("expected int");
    }
  });

  it("every key carries a description", () => {
    const config = sluiceConfigSchema.parse({});
    type Node = {
      description?: string;
      _zod: { def: { type: string; innerType?: Node; shape?: Record<string, Node> } };
    };
    const shapeOf = (n: Node): Record<string, Node> | undefined => {
      let inner: Node | undefined = n;
      while (inner && inner._zod.def.type !== "object") inner = inner._zod.def.innerType;
      return inner?._zod.def.shape;
    };
    const root = shapeOf(sluiceConfigSchema as unknown as Node)!;
    const undocumented: string[] = [];
    for (const [section, node] of Object.entries(root)) {
      for (const [key, field] of Object.entries(shapeOf(node) ?? {})) {
        if (!field.description) undocumented.push(`${section}.${key}`);
      }
    }
    expect(undocumented).toEqual([]);
    expect(Object.keys(config)).toEqual([
      "kafka",
      "topics",
      "consumer",
      "batching",
      "delivery",
      "model",
      "fallback",
      "lanes",
      "observability",
      "batch",
      "shutdown",
      "schemaRegistry",
      "cost",
      "tracing",
    ]);
  });
});
