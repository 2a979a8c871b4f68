import { randomBytes } from "node:crypto";
import type { Command } from "commander";
import type { SluiceConfig } from "../config/config-schema.js";
import type { InferenceResult } from "../contracts/inference.js";
import type { LocalBroker } from "../devtools/local-broker.js";
import type { KafkaClient } from "../kafka/client/kafka-client.js";
import { SluiceError } from "../sluice-error.js";
import { loadCommandConfig } from "./config-command.js";

interface DemoOptions {
  once?: boolean;
  watch?: boolean;
  timeoutMs: string;
}

interface Sample {
  id: string | null;
  text?: string;
  /** Raw bytes instead of an encoded request (the malformed sample). */
  raw?: Buffer;
  deadlineMs?: number;
  note: string;
}

/**
 * `sluice demo` (`npm start`): a broker (KAFKA_BROKERS, or the project's local broker), the default
 * model, the topics, an in-process processor, and a few sample requests whose results are printed.
 */
export function register(program: Command): void {
  program
    .command("demo")
    .description("Start everything locally, send sample requests and print their results (npm start)")
    .option("--once", "exit after the sample results are printed")
    .option("--watch", "then keep a few sample requests a second flowing (for the live page) until Ctrl-C")
    .option("--timeout-ms <ms>", "how long to wait for the sample results", "120000")
    .action(async (opts: DemoOptions, command: Command) => {
      const out = (line = "") => process.stdout.write(`${line}\n`);
      const timeoutMs = Number(opts.timeoutMs);
      if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `--timeout-ms must be a positive integer (ms), got "${opts.timeoutMs}"`,
        );
      }
      let config = await loadCommandConfig(command);
      const { LocalBroker } = await import("../devtools/local-broker.js");
      const { createLogger } = await import("../observability/logger.js");
      const { startServeRuntime } = await import("../app/serve-runtime.js");
      const { createKafka } = await import("../kafka/client/kafka-client.js");
      let broker: LocalBroker | undefined;
      const brokerFromEnv = Boolean(process.env.KAFKA_BROKERS || process.env.SLUICE_KAFKA__BROKERS);
      if (!brokerFromEnv) {
        broker = new LocalBroker({ onProgress: (m) => out(`  broker: ${m}`) });
        out("Starting the local Kafka broker (set KAFKA_BROKERS to use another one)…");
        const status = await broker.start();
        if (!status.bootstrap)
          throw new SluiceError("BROKER_START_FAILED", "local broker reported no address");
        if (status.alreadyRunning) broker = undefined; // not ours to stop
        config = { ...config, kafka: { ...config.kafka, brokers: [status.bootstrap] } };
        out(`Kafka at ${status.bootstrap}`);
      }
      if (!process.env.SLUICE_OBSERVABILITY__METRICS_PORT) {
        // A fixed default port is often taken on a laptop; the demo prints the one it got.
        config = { ...config, observability: { ...config.observability, metricsPort: 0 } };
      }
      const logger = createLogger({
        level: process.env.SLUICE_OBSERVABILITY__LOG_LEVEL ? config.observability.logLevel : "warn",
      });
      out("Loading the model and starting the processor (first run fetches the model)…");
      const runtime = await startServeRuntime(config, logger);
      try {
        out(
          `Model ${runtime.model.identity.name} (${runtime.model.identity.version}); metrics ${runtime.metricsUrl}/metrics, health ${runtime.metricsUrl}/readyz`,
        );
        const page = config.observability.ui ? `${runtime.metricsUrl}/` : undefined;
        if (page) out(`Live page: ${page} (open it in a browser)`);
        const kafka = createKafka(config.kafka);
        let duplicates = 0;
        const off = runtime.events.on("record.outcome", (e) => {
          if (e.outcome === "duplicate") duplicates++;
        });
        // A runtime that stops (e.g. Kafka refused access) fails the demo with its error, at once.
        const failed = runtime.fatal.then((error) => Promise.reject(error));
        failed.catch(() => undefined);
        await Promise.race([runSamples(kafka, config, out, timeoutMs), failed]);
        // The duplicate's outcome is emitted when its transaction commits, which may trail the results.
        const until = Date.now() + 3000;
        while (duplicates < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
        off();
        out(`Duplicates counted (no second result): ${duplicates}`);
        if (opts.once) return;
        const trickle = opts.watch ? startTrickle(kafka, config) : undefined;
        out(
          trickle
            ? `\nProcessor running, with a few sample requests a second${page ? ` (watch them at ${page})` : ""}; press Ctrl-C to stop.`
            : `\nProcessor running; produce to the request topic or press Ctrl-C to stop.${page ? ` Live page: ${page}` : ""}`,
        );
        try {
          await new Promise<void>((resolve, reject) => {
            process.once("SIGINT", () => resolve());
            process.once("SIGTERM", () => resolve());
            void runtime.fatal.then(reject);
            trickle?.failed.catch(reject);
          });
        } finally {
          await trickle?.stop();
        }
      } finally {
        out("Stopping…");
        await runtime.close();
        if (broker) await broker.stop();
      }
    });
}

async function runSamples(
  kafka: KafkaClient,
  config: SluiceConfig,
  out: (line?: string) => void,
  timeoutMs: number,
): Promise<void> {
  const { encodeRequest } = await import("../contracts/request-codec.js");
  const { decodeResult } = await import("../contracts/result-codec.js");
  const run = randomBytes(3).toString("hex");
  const samples: Sample[] = [
    { id: `demo-${run}-1`, text: "Kafka transactions make results exactly once", note: "" },
    { id: `demo-${run}-2`, text: "Micro-batching trades a little latency for throughput", note: "" },
    { id: `demo-${run}-3`, text: "The cat sat on the mat", note: "" },
    { id: `demo-${run}-4`, text: "ONNX Runtime runs the model in worker threads", note: "" },
    {
      id: `demo-${run}-2`,
      text: "Micro-batching trades a little latency for throughput",
      note: "duplicate id",
    },
    {
      id: `demo-${run}-5`,
      text: "This request is already too late",
      deadlineMs: Date.now() - 1000,
      note: "past deadline",
    },
    { id: `demo-${run}-6`, text: "", note: "empty text" },
    { id: null, raw: Buffer.from('{"id": "broken'), note: "malformed JSON" },
  ];
  const topic = config.topics.requests[0] as string;
  const expectedResults = new Set(samples.filter((s) => s.id && !s.raw).map((s) => s.id as string));
  const reader = kafka.consumer({
    groupId: `sluice-demo-reader-${run}`,
    readUncommitted: false,
    maxWaitTimeInMs: 100,
  });
  const results = new Map<string, InferenceResult>();
  const deadLetters: { key: string | null; code: string }[] = [];
  let joined: () => void = () => {};
  const joinedP = new Promise<void>((r) => {
    joined = r;
  });
  reader.on(reader.events.GROUP_JOIN, () => joined());
  await reader.connect();
  try {
    await reader.subscribe({
      topics: [config.topics.results, config.topics.deadLetters],
      fromBeginning: false,
    });
    await reader.run({
      eachMessage: async ({ topic: t, message }) => {
        if (t === config.topics.results && message.value) {
          const r = decodeResult(message.value, message.headers as Record<string, string>);
          if (expectedResults.has(r.id)) results.set(r.id, r);
        } else if (t === config.topics.deadLetters && message.key?.toString() === `demo-bad-${run}`) {
          deadLetters.push({
            key: message.key.toString(),
            code: String(message.headers?.["sluice.error.code"] ?? ""),
          });
        }
      },
    });
    await joinedP;
    // Give the fresh reader group a moment to pin its "latest" start offsets before we produce.
    await new Promise((r) => setTimeout(r, 500));
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({
      topic,
      messages: samples.map((s) => {
        if (s.raw) return { key: `demo-bad-${run}`, value: s.raw };
        const enc = encodeRequest(
          { id: s.id as string, text: s.text ?? "", ...(s.deadlineMs ? { deadlineMs: s.deadlineMs } : {}) },
          config.topics.requestCodec,
        );
        return { key: s.id, value: enc.value, headers: enc.headers };
      }),
    });
    await producer.disconnect();
    out(
      `\nSent ${samples.length} sample requests to ${topic} (one duplicate, one malformed, one late, one empty).`,
    );
    const started = Date.now();
    while (
      (results.size < expectedResults.size || deadLetters.length < 1) &&
      Date.now() - started < timeoutMs
    ) {
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await reader.disconnect();
  }
  out("\nid                      status    output");
  for (const id of expectedResults) {
    const r = results.get(id);
    const output = !r
      ? "(no result yet)"
      : r.output?.embedding
        ? `embedding[${r.output.embedding.length}] ${r.output.embedding
            .slice(0, 4)
            .map((v) => v.toFixed(4))
            .join(", ")} …`
        : r.output?.label
          ? `label ${r.output.label}`
          : `${r.error?.code ?? ""}`;
    out(`${id.padEnd(24)}${(r?.status ?? "-").padEnd(10)}${output}`);
  }
  for (const d of deadLetters)
    out(`${(d.key ?? "").padEnd(24)}${"dead".padEnd(10)}${d.code} (dead-letter topic)`);
  if (results.size < expectedResults.size || deadLetters.length < 1) {
    throw new SluiceError(
      "INTERNAL",
      `sample results incomplete after ${timeoutMs} ms; check the logs (set SLUICE_OBSERVABILITY__LOG_LEVEL=info)`,
    );
  }
}

const TRICKLE_TEXTS = [
  "Kafka transactions make results exactly once",
  "Micro-batching trades a little latency for throughput",
  "The cat sat on the mat",
  "ONNX Runtime runs the model in worker threads",
];

/**
 * `demo --watch`: two sample requests every 500 ms, so the live page has something to draw. Stops at
 * `stop()`; a failed send rejects `failed`.
 */
function startTrickle(
  kafka: KafkaClient,
  config: SluiceConfig,
): { stop(): Promise<void>; failed: Promise<never> } {
  const topic = config.topics.requests[0] as string;
  const run = randomBytes(3).toString("hex");
  const producer = kafka.producer();
  let running = true;
  let n = 0;
  const loop = (async () => {
    const { encodeRequest } = await import("../contracts/request-codec.js");
    await producer.connect();
    try {
      while (running) {
        const messages = [0, 1].map(() => {
          const id = `demo-${run}-w${n++}`;
          const enc = encodeRequest(
            { id, text: TRICKLE_TEXTS[n % TRICKLE_TEXTS.length] as string },
            config.topics.requestCodec,
          );
          return { key: id, value: enc.value, headers: enc.headers };
        });
        await producer.send({ topic, messages });
        await new Promise((r) => setTimeout(r, 500));
      }
    } finally {
      await producer.disconnect();
    }
  })();
  const failed = loop.then(() => new Promise<never>(() => {}));
  failed.catch(() => undefined);
  return {
    failed,
    async stop() {
      running = false;
      await loop.catch(() => undefined);
    },
  };
}
