import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { envNameFor } from "../config/env-overrides.js";
import { SluiceError } from "../sluice-error.js";
import { LivePage, PAGE_HEADERS, SNAPSHOT_PATH } from "./live-page.js";

/** What `/readyz` reports. `reason` is shown to operators when not ready. */
export interface Readiness {
  ready: boolean;
  reason?: string;
}

export type ReadinessProbe = () => boolean | Readiness | Promise<boolean | Readiness>;

/** How long `/readyz` waits for the readiness probe before it answers 503, ms. */
export const READY_PROBE_TIMEOUT_MS = 2000;

export interface ObservabilityServerOptions {
  /** Registry served on `/metrics` (usually `SluiceMetrics.registry`). */
  registry: Registry;
  /** Drives `/readyz`. Default: always ready. */
  isReady?: ReadinessProbe;
  /** Max time a readiness probe may take before `/readyz` answers 503, ms. Default `READY_PROBE_TIMEOUT_MS`. */
  readyTimeoutMs?: number;
  /**
   * The live page (`/` and `/ui/*`, config `observability.ui`): `snapshot` builds the JSON the page
   * polls, on request only. Absent: those paths answer 404.
   */
  ui?: { snapshot: () => Promise<unknown> };
}

export interface ListenOptions {
  /** Interface to bind (config `observability.metricsHost`). */
  host: string;
  /** TCP port; 0 picks a free ephemeral port (read it back from `port`) (config `observability.metricsPort`). */
  port: number;
}

/**
 * Small `node:http` server for Prometheus scrapes and Kubernetes-style probes:
 * `/metrics` (text exposition), `/healthz` (200 while the process serves HTTP at all),
 * `/readyz` (200 when `isReady()` says so, else 503 with `{"ready":false,"reason":…}`), and, when
 * `ui` is given, the live page at `/` with its assets under `/ui/` and `/ui/snapshot.json`
 * (docs/observability.md, "Live page").
 */
export class ObservabilityServer {
  private readonly registry: Registry;
  private readonly isReady: ReadinessProbe;
  private readonly readyTimeoutMs: number;
  private readonly ui: { snapshot: () => Promise<unknown>; page: LivePage } | undefined;
  private server: Server | undefined;
  private boundPort: number | undefined;
  private stopping: Promise<void> | undefined;

  constructor(opts: ObservabilityServerOptions) {
    const readyTimeoutMs = opts.readyTimeoutMs ?? READY_PROBE_TIMEOUT_MS;
    this.registry = opts.registry;
    this.isReady = opts.isReady ?? (() => true);
    this.readyTimeoutMs = readyTimeoutMs;
    this.ui = opts.ui ? { snapshot: opts.ui.snapshot, page: new LivePage() } : undefined;
  }

  /** Port actually bound (useful with `port: 0`); throws before `start()`. */
  get port(): number {
    if (this.boundPort === undefined) throw new SluiceError("INTERNAL", "ObservabilityServer is not started");
    return this.boundPort;
  }

  async start({ host, port }: ListenOptions): Promise<{ host: string; port: number }> {
    if (this.server) throw new SluiceError("INTERNAL", "ObservabilityServer already started");
    const server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
        res.end(`internal error: ${(err as Error).message}\n`);
      });
    });
    await new Promise<void>((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException) => {
        const key = `observability.metricsPort (${envNameFor("observability.metricsPort")})`;
        const why =
          err.code === "EADDRINUSE"
            ? `port ${port} on ${host} is already in use (EADDRINUSE): stop the process listening there, or set ${key} to a free port, or 0 for any free port`
            : `cannot listen on ${host}:${port} (${err.code ?? err.message}): check observability.metricsHost and ${key}`;
        reject(new SluiceError("CONFIG_INVALID", `metrics server: ${why}`, { cause: err }));
      };
      server.once("error", onError);
      server.listen(port, host, () => {
        server.off("error", onError);
        resolve();
      });
    });
    this.server = server;
    this.boundPort = (server.address() as AddressInfo).port;
    return { host, port: this.boundPort };
  }

  /** Safe to call twice or before start: concurrent callers share one promise. */
  stop(): Promise<void> {
    if (!this.server) return Promise.resolve();
    if (!this.stopping) {
      const server = this.server;
      this.stopping = new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive scrape connections would hold close() open for their idle timeout.
        server.closeAllConnections();
      }).finally(() => {
        this.server = undefined;
        this.boundPort = undefined;
        this.stopping = undefined;
      });
    }
    return this.stopping;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" });
      res.end("method not allowed\n");
      return;
    }
    switch (path) {
      case "/metrics": {
        const body = await this.registry.metrics();
        res.writeHead(200, { "content-type": this.registry.contentType });
        res.end(body);
        return;
      }
      case "/healthz":
        sendJson(res, 200, { alive: true });
        return;
      case "/readyz": {
        const readiness = await this.probeReadiness();
        sendJson(res, readiness.ready ? 200 : 503, readiness);
        return;
      }
      default: {
        if (this.ui && (await this.servePage(path ?? "/", res))) return;
        res.writeHead(404, { "content-type": "text/plain" });
        res.end(`not found; try ${this.ui ? "/ (the live page), " : ""}/metrics, /healthz or /readyz\n`);
      }
    }
  }

  /** The live page's files and snapshot; false when `path` is not one of them. */
  private async servePage(path: string, res: ServerResponse): Promise<boolean> {
    const ui = this.ui;
    if (!ui) return false;
    if (path === SNAPSHOT_PATH) {
      res.writeHead(200, { "content-type": "application/json", ...PAGE_HEADERS });
      res.end(JSON.stringify(await ui.snapshot()));
      return true;
    }
    const asset = ui.page.asset(path);
    if (!asset) return false;
    const read = await asset.catch((error: NodeJS.ErrnoException) => error);
    if (read instanceof Error) {
      res.writeHead(503, { "content-type": "text/plain" });
      res.end(
        `the live page's file for ${path} is not installed (${read.code ?? read.message}): this installation lacks the package's web/ folder or uplot; /metrics still works, observability.ui: false turns the page off\n`,
      );
      return true;
    }
    res.writeHead(200, { "content-type": read.contentType, ...PAGE_HEADERS });
    res.end(read.body);
    return true;
  }

  private async probeReadiness(): Promise<Readiness> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<Readiness>((resolve) => {
        timer = setTimeout(
          () =>
            resolve({ ready: false, reason: `readiness probe timed out after ${this.readyTimeoutMs} ms` }),
          this.readyTimeoutMs,
        );
      });
      const probed = Promise.resolve()
        .then(() => this.isReady())
        .then(
          (r): Readiness =>
            typeof r === "boolean" ? (r ? { ready: true } : { ready: false, reason: "not ready" }) : r,
        );
      return await Promise.race([probed, timeout]);
    } catch (err) {
      return { ready: false, reason: `readiness probe failed: ${(err as Error).message}` };
    } finally {
      clearTimeout(timer);
    }
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
