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

describe("ObservabilityServer live page (observability.ui)", () => {
  it("serves the page, its assets and the snapshot, with a same-origin-only policy", async () => {
    let calls = 0;
    const { base } = await started({
      registry: new Registry(),
      ui: {
        snapshot: async () => {
          calls++;
          return { at: 1, instanceId: "i" };
        },
      },
    });
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const html = await page.text();
    expect(html).toContain('src="/ui/uplot.js"');
    expect(html).not.toMatch(/https?:\/\//); // nothing from elsewhere
    for (const asset of ["/ui/app.js", "/ui/style.css", "/ui/uplot.js", "/ui/uplot.css"]) {
      const res = await fetch(`${base}${asset}`);
      expect(res.status, asset).toBe(200);
      expect((await res.text()).length, asset).toBeGreaterThan(100);
    }
    expect(await (await fetch(`${base}/ui/uplot.js`)).text()).toContain("uPlot");
    expect(calls).toBe(0); // nothing is built until the page asks
    const snap = await fetch(`${base}/ui/snapshot.json`);
    expect(snap.headers.get("content-type")).toContain("application/json");
    expect(await snap.json()).toEqual({ at: 1, instanceId: "i" });
    expect(calls).toBe(1);
    // Only the listed files: no path reaches the file system.
    expect((await fetch(`${base}/ui/../package.json`)).status).toBe(404);
    expect((await fetch(`${base}/ui/index.html`)).status).toBe(404);
  });

  it("without ui (observability.ui: false) the page and the snapshot are 404", async () => {
    const { base } = await started({ registry: new Registry() });
    for (const path of ["/", "/index.html", "/ui/app.js", "/ui/snapshot.json"]) {
      expect((await fetch(`${base}${path}`)).status, path).toBe(404);
    }
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
  });
});
