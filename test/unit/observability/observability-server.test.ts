import { Counter, Registry } from "prom-client";
import { afterEach, describe, expect, it } from "vitest";
import { ObservabilityServer } from "../../../src/observability/observability-server.js";

const servers: ObservabilityServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function started(opts: ConstructorParameters<typeof ObservabilityServer>[0]) {
  const server = new ObservabilityServer(opts);
  servers.push(server);
  const { port } = await server.start({ host: "127.0.0.1", port: 0 });
  return { server, base: `http://127.0.0.1:${port}` };
}

describe("ObservabilityServer", () => {
  it("serves /metrics from the registry and /healthz", async () => {
    const registry = new Registry();
    new Counter({ name: "demo_things_total", help: "demo", registers: [registry] }).inc(3);
    const { server, base } = await started({ registry });
    expect(server.port).toBeGreaterThan(0);
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.headers.get("content-type")).toContain("text/plain");
    expect(await metrics.text()).toContain("demo_things_total 3");
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    expect((await fetch(`${base}/nope`)).status).toBe(404);
  });

  it("/readyz follows isReady, with a JSON reason when not ready", async () => {
    let state: boolean | { ready: boolean; reason?: string } = {
      ready: false,
      reason: "partitions not assigned",
    };
    const { base } = await started({ registry: new Registry(), isReady: () => state });
    let res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ ready: false, reason: "partitions not assigned" });
    state = true;
    res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(200);
    state = false;
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
  });

  it("answers 503 when the probe throws or hangs", async () => {
    const { base } = await started({
      registry: new Registry(),
      isReady: () => new Promise<boolean>(() => {}),
      readyTimeoutMs: 50,
    });
    const res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(((await res.json()) as { reason: string }).reason).toMatch(/timed out/);
    const { base: base2 } = await started({
      registry: new Registry(),
      isReady: () => {
        throw new Error("boom");
      },
    });
    expect((await fetch(`${base2}/readyz`)).status).toBe(503);
  });

  it("stop is idempotent and frees the port; busy port gives CONFIG_INVALID", async () => {
    const { server } = await started({ registry: new Registry() });
    const port = server.port;
    const other = new ObservabilityServer({ registry: new Registry() });
    await expect(other.start({ host: "127.0.0.1", port })).rejects.toMatchObject({ code: "CONFIG_INVALID" });
    await Promise.all([server.stop(), server.stop()]);
    await server.stop();
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });
});
