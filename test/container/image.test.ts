import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../src/config/project-paths.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { ensureDefaultModel } from "../../src/model/default-model.js";
import { createTopics, produceMessages, testBrokers, uniqueName } from "../support/kafka-harness.js";
import { podman, podmanOk, podmanPath } from "../support/podman.js";
import { countResultIds, readCommitted, serveEnv } from "../support/serve-process.js";

// The production image, built from the Dockerfile with podman and run against the test broker on the
// host (`--network host`). `npm run test:container` runs this file; `scripts/container-setup.sh`
// installs podman and makes the base image where Docker Hub cannot be reached.
const IMAGE = "localhost/sluice:test";
const MOUNT_IMAGE = "localhost/sluice:test-mount";
const root = packageRoot();
const running: string[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** `-e K=V` flags for a private set of topics and group on the test broker. */
function envFlags(env: Record<string, string>): string[] {
  return Object.entries({ ...env, KAFKA_BROKERS: testBrokers().join(",") }).flatMap(([k, v]) => [
    "-e",
    `${k}=${v}`,
  ]);
}

async function until(cond: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Runs `command args` in a throwaway container of `image` (no network). */
function inImage(image: string, command: string, ...args: string[]): Promise<string> {
  return podmanOk(["run", "--rm", "--network", "none", "--entrypoint", command, image, ...args]);
}

async function build(tag: string, extra: string[] = []): Promise<number> {
  const started = Date.now();
  await podmanOk(
    ["build", "--format", "docker", "--pull=never", "--network", "host", "-t", tag, ...extra, root],
    1_200_000,
  );
  return (Date.now() - started) / 1000;
}

describe("production image (podman)", () => {
  beforeAll(async () => {
    if (!podmanPath()) {
      throw new Error(
        "podman is not installed: run scripts/container-setup.sh (root or sudo) first; .ci/run does so where apt-get is available",
      );
    }
    const seconds = await build(IMAGE);
    console.log(`[container] podman build ${IMAGE}: ${seconds.toFixed(1)} s`);
  }, 1_200_000);

  afterAll(async () => {
    for (const name of running.splice(0)) await podman(["rm", "-f", "-t", "0", name]);
  });

  it("runs as a non-root user, without dev dependencies, with a HEALTHCHECK on /healthz and node as the entrypoint", async () => {
    const [image] = JSON.parse(await podmanOk(["image", "inspect", IMAGE])) as [
      { Config: { User: string; Entrypoint: string[] }; Healthcheck?: { Test: string[] } },
    ];
    expect(image.Config.User).toBe("1000:1000");
    expect(image.Config.Entrypoint).toEqual(["node", "bin/sluice.js"]);
    // Kept only in the docker image format (`--format docker`); OCI images drop it.
    expect(image.Healthcheck?.Test.join(" ")).toContain("/healthz");
    expect((await inImage(IMAGE, "id", "-u")).trim()).toBe("1000");
    // Dev-only packages are the lockfile's `dev: true` entries (a devDependency that a production
    // package also needs, like protobufjs for the registry client, is not one of them).
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => entry.dev === true && path.startsWith("node_modules/"))
      .map(([path]) => path);
    expect(devOnly.length).toBeGreaterThan(50);
    const probe = `const fs=require('fs');console.log(JSON.stringify(${JSON.stringify(devOnly)}.filter((p)=>fs.existsSync('/app/'+p))))`;
    const present = JSON.parse(await inImage(IMAGE, "node", "-e", probe));
    expect(present).toEqual([]);
    const models = await inImage(IMAGE, "ls", "/app/models/bge-small-en-v1.5-q");
    expect(models).toMatch(/bge-small-en-v1\.5-q\.onnx/);
  });

  it("runs on Node.js 24 LTS (node --version inside the image)", async () => {
    // The Dockerfile's node:24-bookworm-slim, or scripts/container-setup.sh's stand-in with the pinned 24.x.
    const version = (await inImage(IMAGE, "node", "--version")).trim();
    console.log(`[container] node --version in ${IMAGE}: ${version}`);
    expect(version).toMatch(/^v24\.\d+\.\d+$/);
  });

  it("sluice demo --once with the baked-in model prints results against the host's broker", async () => {
    const r = await podman(
      [
        "run",
        "--rm",
        "--network",
        "host",
        ...envFlags(serveEnv(uniqueName("img-demo"))),
        IMAGE,
        "demo",
        "--once",
      ],
      300_000,
    );
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/ok\s+embedding\[384\]/);
    expect(r.stdout).toMatch(/Duplicates counted \(no second result\): 1/);
  }, 300_000);

  it("sluice serve: results appear, /readyz and the HEALTHCHECK pass, `podman stop` exits 0 (node is PID 1)", async () => {
    const base = uniqueName("img-serve");
    const port = await freePort();
    const name = `sluice-test-${base}`;
    const requests = `${base}.requests`;
    await createTopics([{ topic: requests, numPartitions: 2 }]);
    const env = serveEnv(base, { SLUICE_OBSERVABILITY__METRICS_PORT: String(port) });
    await podmanOk(["run", "-d", "--name", name, "--network", "host", ...envFlags(env), IMAGE, "serve"]);
    running.push(name);
    // Ready = topics ensured (the results topic exists), model loaded, partitions restored.
    await until(
      async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200,
    );
    const count = 40;
    await produceMessages(
      requests,
      Array.from({ length: count }, (_, i) => ({
        key: `c-${i}`,
        ...encodeRequest({ id: `c-${i}`, text: `container request ${i}` }, "json"),
      })),
    );
    const results = await readCommitted(`${base}.results`, { expected: count, timeoutMs: 120_000 });
    const counts = countResultIds(results);
    expect(counts.size, (await podman(["logs", name])).stderr.slice(-3000)).toBe(count);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    // The live page ships in the image (web/ and uPlot from node_modules).
    const page = await fetch(`http://127.0.0.1:${port}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("uplot");
    expect((await fetch(`http://127.0.0.1:${port}/ui/uplot.js`)).status).toBe(200);
    expect((await podman(["healthcheck", "run", name])).code).toBe(0);
    expect(await podmanOk(["exec", name, "cat", "/proc/1/cmdline"])).toMatch(/^node\0bin\/sluice\.js\0serve/);

    const stopStarted = Date.now();
    const stop = await podman(["stop", "-t", "30", name], 60_000);
    const stopSeconds = (Date.now() - stopStarted) / 1000;
    expect(stop.code, stop.stderr).toBe(0);
    const exitCode = (await podmanOk(["inspect", name, "--format", "{{.State.ExitCode}}"])).trim();
    expect(exitCode, (await podman(["logs", name])).stderr.slice(-3000)).toBe("0"); // SIGTERM handled, not killed
    console.log(`[container] podman stop: ${stopSeconds.toFixed(1)} s, exit code ${exitCode}`);
  }, 300_000);

  it("SLUICE_MODEL=mount builds an image without the model; a mounted models folder serves it", async () => {
    const seconds = await build(MOUNT_IMAGE, ["--build-arg", "SLUICE_MODEL=mount"]);
    console.log(`[container] podman build ${MOUNT_IMAGE} (cached layers): ${seconds.toFixed(1)} s`);
    expect((await inImage(MOUNT_IMAGE, "ls", "-A", "/app/models")).trim()).toBe("");
    const modelsDir = join(root, "models");
    await ensureDefaultModel({ modelsDir });
    const r = await podman(
      [
        "run",
        "--rm",
        "--network",
        "host",
        "-v",
        `${modelsDir}:/app/models:ro`,
        ...envFlags(serveEnv(uniqueName("img-mount"))),
        MOUNT_IMAGE,
        "demo",
        "--once",
      ],
      300_000,
    );
    expect(r.code, r.stderr + r.stdout).toBe(0);
    expect(r.stdout).toMatch(/ok\s+embedding\[384\]/);
  }, 1_500_000);
});
