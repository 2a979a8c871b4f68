import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/config/project-paths.js";
import { runCli } from "../support/cli-process.js";
import { uniqueName } from "../support/kafka-harness.js";
import { serveEnv, startServe } from "../support/serve-process.js";
import { createTinyModel, type TinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

const HOOK = pathToFileURL(join(packageRoot(), "test", "support", "loaded-modules.mjs")).href;
const HEAVY = ["onnxruntime-node", "kafkajs"] as const;

// src/cli/main.ts registers every command cheaply; a command's action imports what it runs. So the
// commands that need neither the model runtime nor a Kafka client load neither, which keeps them
// fast (`sluice --help` in a fraction of a second). Seen from outside: the built CLI with a module
// loader hook (test/support/loaded-modules.mjs) that lists every module the process loaded.
describe("the CLI loads only what a command needs", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-cli-lazy-"));
  let tiny: TinyModel;
  let runs = 0;

  beforeAll(async () => {
    tiny = await createTinyModel(join(dir, "model"), { task: "embedding" });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs `sluice args` and returns its exit code and the packages it loaded from node_modules. */
  async function packagesLoadedBy(args: string[]): Promise<{ code: number | null; packages: Set<string> }> {
    const list = join(dir, `modules-${runs++}.txt`);
    const result = await runCli(args, {
      NODE_OPTIONS: `--import=${HOOK}`,
      SLUICE_TEST_LOADED_MODULES: list,
      SLUICE_KAFKA_HOME: join(dir, "no-broker"),
    });
    const packages = new Set<string>();
    for (const url of readFileSync(list, "utf8").split("\n")) {
      const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
      if (m?.[1]) packages.add(m[1]);
    }
    return { code: result.code, packages };
  }

  it.each([[["--help"]], [["config", "print"]], [["help", "serve"]], [["acls"]]])(
    "sluice %j loads neither onnxruntime-node nor kafkajs",
    async (args) => {
      const { code, packages } = await packagesLoadedBy(args);
      expect(code).toBe(0);
      expect(packages.has("commander")).toBe(true); // the hook saw the CLI's own packages
      for (const heavy of HEAVY) expect(packages.has(heavy), heavy).toBe(false);
    },
  );

  it("the commands that talk to Kafka or run a model do load them (the check can see them)", async () => {
    const kafka = await packagesLoadedBy(["kafka", "status", "--json"]);
    expect(kafka.code).toBe(3); // not running: its own run folder is empty
    expect(kafka.packages.has("kafkajs")).toBe(true);
    const model = await packagesLoadedBy(["model", "info", "--model", tiny.modelPath, "--json"]);
    expect(model.code).toBe(0);
    expect(model.packages.has("onnxruntime-node")).toBe(true);
  });

  it("sluice serve without a schema registry configured does not load the registry client", async () => {
    const list = join(dir, `modules-${runs++}.txt`);
    const serve = startServe([], {
      ...serveEnv(uniqueName("lazy-serve"), tinyModelEnv(tiny)),
      NODE_OPTIONS: `--import=${HOOK}`,
      SLUICE_TEST_LOADED_MODULES: list,
    });
    await serve.waitFor(/"msg":"sluice serve running/, 90_000);
    serve.child.kill("SIGTERM");
    expect((await serve.exited).code).toBe(0);
    const loaded = readFileSync(list, "utf8");
    expect(loaded).toContain("/node_modules/kafkajs/"); // the hook saw serve's own packages
    expect(loaded).not.toContain("/node_modules/@kafkajs/confluent-schema-registry/");
  }, 120_000);
});
