/**
 * Makes docs/images/zipkin-trace.png (docs/observability.md, "Tracing"): a real `sluice serve` (the
 * tiny generated model) exporting to a local Zipkin in a temp run folder, one request sent with a
 * producer's `traceparent` (the producer's `send` span posted to Zipkin as well, so the trace starts
 * where a real one would), and that trace in Zipkin's UI, shot by headless Chromium (Debian's
 * `chromium`, driven by playwright-core, which never downloads a browser).
 *
 *   KAFKA_BROKERS=127.0.0.1:19092 node --import tsx scripts/zipkin-screenshot.ts [out.png]
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kafka, logLevel } from "kafkajs";
import { packageRoot } from "../src/config/project-paths.js";
import { LocalZipkin } from "../src/devtools/local-zipkin.js";
import { createTinyModel, tinyModelEnv } from "../test/support/tiny-onnx.js";
import { type ZipkinSpan, zipkinJson } from "../test/support/zipkin-api.js";

const CHROMIUM = process.env.SLUICE_CHROMIUM ?? "/usr/bin/chromium";
const out = process.argv[2] ?? join(packageRoot(), "docs", "images", "zipkin-trace.png");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const dir = await mkdtemp(join(tmpdir(), "sluice-zipkin-shot-"));
const zipkin = new LocalZipkin({ runDir: join(dir, "zipkin"), port: 0 });
try {
  const status = await zipkin.start();
  const api = status.url as string;
  const base = `demo-${randomBytes(3).toString("hex")}`;
  const topic = `${base}.requests`;
  const brokers = (process.env.KAFKA_BROKERS ?? "127.0.0.1:19092").split(",");
  const serve = spawn(process.execPath, ["--import", "tsx", "src/cli/main.ts", "serve"], {
    cwd: packageRoot(),
    stdio: ["ignore", "pipe", "inherit"],
    env: {
      ...process.env,
      ...tinyModelEnv(await createTinyModel(dir, { task: "embedding" })),
      KAFKA_BROKERS: brokers.join(","),
      SLUICE_TOPICS__REQUESTS: topic,
      SLUICE_TOPICS__RESULTS: `${base}.results`,
      SLUICE_TOPICS__DEAD_LETTERS: `${base}.dlq`,
      SLUICE_TOPICS__DEDUP_CHANGELOG: `${base}.dedup`,
      SLUICE_TOPICS__FRESHNESS: `${base}.freshness`,
      SLUICE_CONSUMER__GROUP_ID: `${base}-group`,
      SLUICE_OBSERVABILITY__METRICS_PORT: "0",
      SLUICE_DELIVERY__COMMIT_INTERVAL_MS: "100",
      OTEL_TRACES_EXPORTER: "zipkin",
      OTEL_EXPORTER_ZIPKIN_ENDPOINT: status.spansEndpoint as string,
      OTEL_BSP_SCHEDULE_DELAY: "200",
    },
  });
  const exited = new Promise((r) => serve.once("exit", r));
  let output = "";
  await new Promise<void>((resolve, reject) => {
    serve.stdout?.on("data", (d: Buffer) => {
      output += d.toString();
      if (output.includes("partition restored")) resolve();
    });
    void exited.then(() => reject(new Error(`sluice serve exited:\n${output.slice(-2000)}`)));
  });
  await sleep(3000); // assigned and restored: the request's time in Sluice is its own

  // The producer's span, as its own tracing would report it.
  const traceId = randomBytes(16).toString("hex");
  const sendId = randomBytes(8).toString("hex");
  const sentAt = Date.now();
  const producer = new Kafka({ clientId: "zipkin-shot", brokers, logLevel: logLevel.NOTHING }).producer();
  await producer.connect();
  await producer.send({
    topic,
    messages: [
      {
        key: "q-1",
        value: Buffer.from(JSON.stringify({ id: "q-1", text: "the cat sat on the mat" })),
        headers: { traceparent: `00-${traceId}-${sendId}-01` },
      },
    ],
  });
  await producer.disconnect();
  const producerSpan = {
    traceId,
    id: sendId,
    name: `send ${topic}`,
    kind: "PRODUCER",
    timestamp: sentAt * 1000,
    duration: Math.max(1, (Date.now() - sentAt) * 1000),
    localEndpoint: { serviceName: "query-api" },
    tags: { "messaging.system": "kafka", "messaging.destination.name": topic },
  };
  await fetch(status.spansEndpoint as string, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify([producerSpan]),
  });
  for (let i = 0; i < 60; i++) {
    const spans = await zipkinJson<ZipkinSpan[]>(api, `/api/v2/trace/${traceId}`).catch(() => []);
    if (spans.length >= 5) break;
    await sleep(250);
  }
  serve.kill("SIGTERM");
  await exited;

  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 560 } });
    await page.goto(`${api}/zipkin/traces/${traceId}`, { waitUntil: "networkidle" });
    await page.getByText(`request ${topic}`).first().click();
    await sleep(1000);
    await page.screenshot({ path: out });
  } finally {
    await browser.close();
  }
  console.log(`wrote ${out} (trace ${traceId})`);
} finally {
  await zipkin.stop();
  await rm(dir, { recursive: true, force: true });
}
