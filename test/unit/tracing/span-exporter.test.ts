import { createServer, type IncomingMessage, type Server } from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tracingSchema } from "../../../src/config/tracing-config-schema.js";
import { createTracing } from "../../../src/tracing/tracer-factory.js";
import { tracingSettings } from "../../../src/tracing/tracing-settings.js";

interface Received {
  path: string;
  contentType: string | undefined;
  body: string;
}

/** An HTTP server on 127.0.0.1 that answers 200 and keeps what it was sent. */
async function collector(): Promise<{ port: number; received: Received[]; server: Server }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
    });
    req.on("end", () => {
      received.push({ path: req.url ?? "", contentType: req.headers["content-type"], body });
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as { port: number }).port, received, server };
}

const servers: Server[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const server of servers.splice(0)) await new Promise((r) => server.close(r));
});

async function exportOneSpan(env: Record<string, string>) {
  const tracing = await createTracing(
    tracingSettings(tracingSchema.parse({}), { OTEL_BSP_SCHEDULE_DELAY: "10", ...env }),
    {
      serviceVersion: "1.2.3",
    },
  );
  tracing.tracer.startRequest("requests", 4, { offset: "17" }, "online").commit();
  await tracing.forceFlush();
  const stats = tracing.stats();
  await tracing.shutdown();
  return stats;
}

describe("the exporters the settings name", () => {
  it("otlp: OTLP/HTTP JSON to <OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces", async () => {
    const c = await collector();
    servers.push(c.server);
    const stats = await exportOneSpan({
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${c.port}`,
      OTEL_SERVICE_NAME: "sluice-otlp",
    });
    expect(stats).toMatchObject({ exported: 1, failedExports: 0, dropped: 0 });
    expect(c.received).toHaveLength(1);
    const [request] = c.received;
    expect(request!.path).toBe("/v1/traces");
    expect(request!.contentType).toMatch(/^application\/json/);
    const body = JSON.parse(request!.body) as {
      resourceSpans: {
        resource: { attributes: { key: string; value: { stringValue?: string } }[] };
        scopeSpans: { spans: { name: string; kind: number }[] }[];
      }[];
    };
    const resource = body.resourceSpans[0]!.resource.attributes;
    expect(resource.find((a) => a.key === "service.name")?.value.stringValue).toBe("sluice-otlp");
    expect(resource.find((a) => a.key === "service.version")?.value.stringValue).toBe("1.2.3");
    expect(body.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name)).toEqual(["request requests"]);
  });

  it("zipkin: Zipkin v2 JSON to OTEL_EXPORTER_ZIPKIN_ENDPOINT", async () => {
    const c = await collector();
    servers.push(c.server);
    const stats = await exportOneSpan({
      OTEL_TRACES_EXPORTER: "zipkin",
      OTEL_EXPORTER_ZIPKIN_ENDPOINT: `http://127.0.0.1:${c.port}/api/v2/spans`,
    });
    expect(stats).toMatchObject({ exported: 1, failedExports: 0 });
    const spans = JSON.parse(c.received[0]!.body) as {
      name: string;
      localEndpoint: { serviceName: string };
    }[];
    expect(c.received[0]!.path).toBe("/api/v2/spans");
    expect(spans.map((s) => [s.name, s.localEndpoint.serviceName])).toEqual([["request requests", "sluice"]]);
  });

  it("console: the span on stdout", async () => {
    const dir = vi.spyOn(console, "dir").mockImplementation(() => {});
    const stats = await exportOneSpan({ OTEL_TRACES_EXPORTER: "console" });
    expect(stats.exported).toBe(1);
    expect(dir).toHaveBeenCalledWith(
      expect.objectContaining({ name: "request requests" }),
      expect.anything(),
    );
  });
});
