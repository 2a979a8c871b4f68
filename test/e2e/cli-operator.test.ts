import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envNameFor } from "../../src/config/env-overrides.js";
import { packageRoot } from "../../src/config/project-paths.js";
import { runCli } from "../support/cli-process.js";
import { testBrokers, uniqueName } from "../support/kafka-harness.js";
import { serveEnv, startLogged } from "../support/serve-process.js";
import { createTinyModel, type TinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

/** Every file below `dir`, relative to it. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

// What a new operator runs in the first hour (issue 13): each command says what is wrong, in the
// words of the setting to change, and exits non-zero when it failed.
describe("sluice CLI, the operator's first hour", () => {
  const dir = mkdtempSync(join(tmpdir(), "sluice-cli-operator-"));
  let tiny: TinyModel;
  const kafkaEnv = () => ({ KAFKA_BROKERS: testBrokers().join(",") });

  beforeAll(async () => {
    tiny = await createTinyModel(join(dir, "model"), { task: "embedding" });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("serve --help lists the options, the common keys with their variables and points to docs/configuration.md", async () => {
    const result = await runCli(["serve", "--help"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("-c, --config <path>");
    for (const key of ["kafka.brokers", "topics.requests", "consumer.groupId", "model.path"])
      expect(result.stdout).toMatch(new RegExp(`${key.replace(".", "\\.")}\\s+${envNameFor(key)}`));
    expect(result.stdout).toContain("docs/configuration.md");
    expect(result.stdout).toContain("sluice config print");
  });

  it("model info --model noop describes the no-op model instead of failing", async () => {
    const result = await runCli(["model", "info", "--model", "noop"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("name:        noop");
    expect(result.stdout).toContain("384 dimensions");
    const json = await runCli(["model", "info", "--model", "noop", "--json"]);
    expect(JSON.parse(json.stdout)).toMatchObject({ identity: { name: "noop" }, outputSize: 384 });
  });

  it('infer --text "" says rejected (as serve does), with the noop and a real model', async () => {
    for (const model of ["noop", tiny.modelPath]) {
      const result = await runCli(["infer", "--model", model, "--text", ""]);
      expect(result.code).toBe(1);
      expect(JSON.parse(result.stdout)).toMatchObject({ status: "rejected", error: { code: "EMPTY_TEXT" } });
    }
  });

  it("infer finds tokenizer.json next to --model, and names --model for a wrong path", async () => {
    const ok = await runCli(["infer", "--model", tiny.modelPath, "--text", "the cat"]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ status: "ok" });
    const missing = await runCli(["infer", "--model", join(dir, "nope.onnx"), "--text", "x"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`MODEL_NOT_FOUND: --model = ${join(dir, "nope.onnx")}: no such file`);
  });

  it("status --group of a group that does not exist exits non-zero and says so", async () => {
    const group = uniqueName("never-ran");
    const result = await runCli(["status", "--group", group], kafkaEnv());
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toContain(`GROUP_NOT_FOUND: consumer group "${group}" does not exist`);
    expect(result.stderr).toContain("--group");
  });

  it("serve with a wrong model.path names model.path and SLUICE_MODEL__PATH, not --model or the tokenizer", async () => {
    const env = serveEnv(uniqueName("badmodel"), { SLUICE_MODEL__PATH: join(dir, "missing", "model.onnx") });
    const result = await runCli(["serve"], env, 60_000);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("MODEL_NOT_FOUND: model.path (SLUICE_MODEL__PATH) =");
    expect(result.stderr).not.toMatch(/--model|tokenizer/);
  });

  it("serve with its metrics port taken exits non-zero naming the port and the key (the loaded model is released)", async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const env = serveEnv(uniqueName("portbusy"), {
        ...tinyModelEnv(tiny),
        SLUICE_OBSERVABILITY__METRICS_PORT: String(port),
      });
      // Before the fix the process never exited: its model's worker threads kept it alive.
      const result = await runCli(["serve"], env, 60_000);
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`port ${port} on 127.0.0.1 is already in use (EADDRINUSE)`);
      expect(result.stderr).toContain("observability.metricsPort (SLUICE_OBSERVABILITY__METRICS_PORT)");
    } finally {
      blocker.close();
    }
  });

  it("a model session leaves nothing in HOME or the temp folder: onnxruntime telemetry is off by default", async () => {
    const home = mkdtempSync(join(dir, "home-"));
    const tmp = mkdtempSync(join(dir, "tmp-"));
    const result = await runCli(["infer", "--model", tiny.modelPath, "--text", "the cat"], {
      HOME: home,
      TMPDIR: tmp,
      XDG_CACHE_HOME: "",
      // onnxruntime also stays quiet in CI or when told so: make sure it is Sluice that turns it off.
      ORT_DISABLE_TELEMETRY: "",
      CI: "",
      GITHUB_ACTIONS: "",
      TSX_DISABLE_CACHE: "1", // tsx (the test's TypeScript loader, not Sluice) caches in the temp folder
    });
    expect(result.code).toBe(0);
    // Without the switch onnxruntime 1.30 writes .cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,
    // onnxruntime.db} under HOME and mat-debug-<pid>.log and .ses into TMPDIR (checked by hand: it also
    // tries to upload, so the suite does not run that case).
    expect(filesBelow(home)).toEqual([]);
    expect(filesBelow(tmp)).toEqual([]);
  });

  // npx runs bin/sluice.js, which runs dist/: the global setup built it for this run. With a cold npx
  // cache (a fresh npm cache here, as on a fresh machine) npx links the project into that cache and
  // runs its `prepare`; that must not rebuild dist/ under the other tests' processes (scripts/prepare.sh).
  it("npx sluice serve uses the built dist/ and stops on SIGTERM to npx: node does not outlive npm → sh", async () => {
    const main = join(packageRoot(), "dist", "src", "cli", "main.js");
    const builtAt = statSync(main).mtimeMs;
    const npmCache = mkdtempSync(join(dir, "npm-cache-"));
    const serve = startLogged("npx", ["sluice", "serve"], {
      ...serveEnv(uniqueName("npx"), tinyModelEnv(tiny)),
      npm_config_cache: npmCache,
      npm_config_update_notifier: "false",
    });
    await serve.waitFor(/"msg":"sluice serve running/, 90_000);
    expect(readdirSync(join(npmCache, "_npx"))).toHaveLength(1); // npx did link the project afresh
    expect(statSync(main).mtimeMs).toBe(builtAt);
    const nodePid = Number(/"pid":(\d+)[^\n]*"msg":"sluice serve running/.exec(serve.output())?.[1]);
    expect(nodePid).not.toBe(serve.child.pid); // npx → sh → node: the process we signal is not node
    serve.child.kill("SIGTERM");
    const alive = () => {
      try {
        process.kill(nodePid, 0);
        return true;
      } catch {
        return false;
      }
    };
    const deadline = Date.now() + 30_000;
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    if (alive()) process.kill(nodePid, "SIGKILL");
    expect(alive()).toBe(false);
    // It stopped the graceful way (the pipe may deliver its last line a moment after the exit).
    const until = Date.now() + 5000;
    while (!serve.output().includes('"msg":"sluice serve stopped"') && Date.now() < until)
      await new Promise((r) => setTimeout(r, 100));
    expect(serve.output()).toContain('"msg":"sluice serve stopped"');
  }, 150_000);
});
