import type { Logger } from "pino";
import { backfillResultsTopic, maxBatchSize, type SluiceConfig } from "../config/config-schema.js";
import { SluiceEvents } from "../events/sluice-events.js";
import type { KafkaClient } from "../kafka/client/kafka-client.js";
import { createKafka } from "../kafka/client/kafka-client.js";
import { observeKafkaRequests } from "../kafka/client/request-timing.js";
import { ensureTopics } from "../kafka/client/topic-admin.js";
import { KafkaGroupOffsetsReader } from "../kafka/probes/kafka-group-offsets-reader.js";
import { kafkaLagReaders } from "../kafka/probes/kafka-lag-readers.js";
import { ModelControlFeed } from "../kafka/runs/model-control-feed.js";
import { ModelControlStore } from "../kafka/runs/model-control-store.js";
import { RunManifestFeed } from "../kafka/runs/run-manifest-feed.js";
import { RunManifestStore } from "../kafka/runs/run-manifest-store.js";
import { KafkaHeartbeatSink } from "../kafka/write/kafka-heartbeat-sink.js";
import type { LoadedModel } from "../model/model-loader.js";
import {
  candidateRunnerOptionsFromConfig,
  modelRunnerOptionsFromConfig,
} from "../model/model-runner-config.js";
import { ModelSet, outputShapeOf } from "../model/model-set.js";
import { BackfillRunBoard } from "../observability/backfill-run-board.js";
import { BatchLog } from "../observability/batch-log.js";
import { DeadLetterLog } from "../observability/dead-letter-log.js";
import { HeartbeatPublisher } from "../observability/heartbeat-publisher.js";
import { InFlightRecords } from "../observability/in-flight-records.js";
import { LagMonitor } from "../observability/lag-monitor.js";
import { LifecycleLog } from "../observability/lifecycle-log.js";
import { LiveSnapshot } from "../observability/live-snapshot.js";
import { ownFieldsChild } from "../observability/logger.js";
import { SluiceMetrics } from "../observability/metrics.js";
import { ObservabilityServer } from "../observability/observability-server.js";
import { ModelSwitch } from "../processor/model-switch.js";
import type { StreamProcessor } from "../processor/stream-processor.js";
import { processorOptionsFromConfig } from "../processor/stream-processor-options.js";
import type { SluiceError } from "../sluice-error.js";
import { createTracing, tracingSettings } from "../tracing/index.js";
import { createStreamProcessor } from "./stream-processor-factory.js";
import { createWireCodecs } from "./wire-codecs.js";

export interface ServeRuntime {
  processor: StreamProcessor;
  events: SluiceEvents;
  model: LoadedModel;
  /** The serving model and the candidate, when configured (docs/model-upgrades.md). */
  models: ModelSet;
  /** Base URL of the metrics/health server, e.g. `http://127.0.0.1:9464`. */
  metricsUrl: string;
  /** Resolves when the runtime stops by itself after a fatal error (with that error). */
  fatal: Promise<SluiceError>;
  /** Graceful stop (processor, lag monitor, metrics server, model). Safe to call twice. */
  close(): Promise<void>;
}

/**
 * Everything `sluice serve` (and the in-process `sluice demo`) runs: topics, model, metrics/health
 * server, lag monitor and the stream processor, wired from one configuration.
 */
export async function startServeRuntime(config: SluiceConfig, logger: Logger): Promise<ServeRuntime> {
  // Results are keyed by request id; the v2 default (Java-compatible murmur2) partitioner is what we want.
  process.env.KAFKAJS_NO_PARTITIONER_WARNING ??= "1";
  // A throwing subscriber is a Sluice bug (metrics, logs): report it, never let it reach the pipeline.
  const events = new SluiceEvents({
    onListenerError: (event, error) =>
      logger.error(
        { event, err: String(error) },
        "event subscriber threw; ignored (a bug in Sluice: please report it)",
      ),
  });
  // `instance_id`, not `instance`: Prometheus sets `instance` to the scrape target and would rename ours
  // to `exported_instance`.
  const metrics = new SluiceMetrics({
    defaultLabels: { instance_id: config.observability.instanceId },
    backfillTopics: config.topics.backfill,
  });
  const detachMetrics = metrics.attach(events);
  // One request-log line per micro-batch (counts, timings, hashed ids); skipped above level info.
  // Its fields are all Sluice's own, so only the user's redaction paths apply to it (logger.ts).
  const detachBatchLog = new BatchLog({
    logger: ownFieldsChild(logger, { component: "batch-log" }, config.observability.redactPaths),
  }).attach(events);
  // One warn line per committed dead letter (code, stage, source offset, hashed id; never the record).
  const detachDeadLetterLog = new DeadLetterLog({
    logger: logger.child({ component: "dead-letters" }),
  }).attach(events);
  // The Sluice-level summary lines (model loaded, partitions assigned/revoked) and debug detail.
  const detachLifecycleLog = new LifecycleLog(logger.child({ component: "lifecycle" })).attach(events);
  // Subscribes to partition/record/transaction events, so it must exist before the processor starts.
  const inFlight = new InFlightRecords(events);
  // Registry start-up work (probe, result schema registration) first: a misconfiguration fails fast.
  const wire = await createWireCodecs(config);
  // Backfill results in a topic of their own get that topic's encoder (its registry subject).
  const backfillResults = backfillResultsTopic(config.topics);
  const ownBackfillTopic = config.topics.backfill.length > 0 && backfillResults !== config.topics.results;
  const codecs = {
    requestDecoder: wire.requestDecoder,
    resultEncoder: await wire.resultEncoder(config.topics.results),
    ...(ownBackfillTopic ? { backfillResultEncoder: await wire.resultEncoder(backfillResults) } : {}),
  };
  const kafka = createKafka(config.kafka, logger.child({ component: "kafkajs" }));
  // Every Kafka request's duration, by API (sluice_kafka_request_duration_seconds).
  const detachRequests = observeKafkaRequests(kafka, (timing) => events.emit("kafka.request", timing));
  // A security failure (credentials, ACL, certificate) anywhere stops the runtime: it is reported once,
  // /readyz says why until the process exits, and nothing retries it.
  let failure: SluiceError | undefined;
  let stopOnFailure: (error: SluiceError) => void = () => {};
  const failed = new Promise<SluiceError>((resolve) => {
    stopOnFailure = (error) => {
      if (failure) return;
      failure = error;
      resolve(error);
    };
  });
  const refused = (error: SluiceError): void => {
    logger.error(
      { code: error.code, err: error.message, ...error.context },
      "Kafka refused access; stopping",
    );
    stopOnFailure(error);
  };
  await ensureTopics(kafka, {
    // Backfill topics are inputs too: created like request topics, each with its dedup changelog.
    requests: [...config.topics.requests, ...config.topics.backfill],
    results: config.topics.results,
    deadLetters: config.topics.deadLetters,
    dedupChangelog: config.topics.dedupChangelog,
    groupId: config.consumer.groupId,
    freshness: config.topics.freshness,
    backfillResults: config.topics.backfillResults,
    shadowResults: (config.candidate?.shadowShare ?? 0) > 0 ? config.topics.shadowResults : undefined,
    partitions: config.topics.partitions,
    replicationFactor: config.topics.replicationFactor,
  });
  // Backfill partitions write their runs' cost shares to the runs topic (docs/observability.md,
  // "Cost"). Backfill rows exist only after a submit, which creates the topic too, so a serve that may
  // not create topics starts anyway.
  if (config.topics.backfill.length > 0) {
    await createOrWarn(
      new RunManifestStore({
        kafka,
        topic: config.topics.runs,
        replicationFactor: config.topics.replicationFactor,
      }),
      logger,
      "cannot create the runs topic (topics.runs); the first backfill submit creates it",
    );
  }

  // Spans of every request (docs/observability.md, "Tracing"): off unless an exporter is set, and then
  // the OpenTelemetry SDK is loaded; a bad OTEL_* variable stops start-up here (CONFIG_INVALID).
  const tracing = await createTracing(tracingSettings(config.tracing), {
    consumerGroup: config.consumer.groupId,
    instanceId: config.observability.instanceId,
    maxLinksPerSpan: maxBatchSize(config.batching, config.model.task),
  });
  if (tracing.enabled) metrics.observeSpanExports(() => tracing.stats());

  const fetchLog = (line: string) => logger.info({ component: "model-fetch" }, line);
  const models = await ModelSet.load(
    await modelRunnerOptionsFromConfig(config, fetchLog),
    await candidateRunnerOptionsFromConfig(config, fetchLog),
  ).catch(async (error: unknown) => {
    await tracing.shutdown();
    throw error;
  });
  const model = models.serving.model;
  for (const { role, model: m, cost } of models.roles) {
    events.emit("model.loaded", {
      name: m.identity.name,
      version: m.identity.version,
      task: m.task,
      ...(m.workers ? { workers: m.workers } : {}),
      role,
      rssMiB: cost.rssMiB,
      loadMs: cost.loadMs,
      output: outputShapeOf(m),
    });
  }
  const differences = models.differences();
  if (differences.length > 0)
    logger.warn(
      {
        component: "lifecycle",
        differences,
        serving: model.identity,
        candidate: models.candidate?.model.identity,
      },
      "the candidate outputs something else than the serving model (allowed: it is a new model); readers of its results and shadow results must expect it",
    );

  // A start-up failure after the model loaded must release it: its worker threads would keep the
  // process alive, and serve would neither run nor exit.
  const releaseModel = async (error: unknown): Promise<never> => {
    await models.close().catch(() => undefined);
    await tracing.shutdown();
    throw error;
  };

  // The group's model decisions (docs/model-upgrades.md): read to the end before any partition is
  // restored, so an instance that starts or joins later answers with the decided version.
  const { modelSwitch, feed } = await startModelSwitch(config, kafka, models, events, logger).catch(
    releaseModel,
  );

  const processor = createStreamProcessor(
    processorOptionsFromConfig(config, {
      kafka,
      model: models.servingPort(),
      router: modelSwitch,
      ...(models.candidate && config.candidate && config.candidate.shadowShare > 0
        ? {
            shadow: {
              candidate: models.candidate.model,
              share: config.candidate.shadowShare,
              topic: config.topics.shadowResults,
            },
          }
        : {}),
      events,
      log: logger.child({ component: "stream-processor" }),
      codecs,
      tracer: tracing.tracer,
    }),
    { onAccessFailure: refused },
  );
  // The live page (observability.ui): built from the registry and the processor on request only.
  const runOffsets = new KafkaGroupOffsetsReader(kafka);
  const ui = config.observability.ui
    ? { snapshot: liveSnapshot(config, kafka, metrics, processor, runOffsets) }
    : undefined;
  const server = new ObservabilityServer({
    registry: metrics.registry,
    isReady: () =>
      failure ? { ready: false, reason: `${failure.code}: ${failure.message}` } : processor.readiness(),
    ...(ui ? { ui } : {}),
  });
  const bound = await server
    .start({
      host: config.observability.metricsHost,
      port: config.observability.metricsPort,
    })
    .catch(releaseModel);
  const lag = new LagMonitor({
    ...kafkaLagReaders(kafka),
    groupId: config.consumer.groupId,
    topics: [...config.topics.requests, ...config.topics.backfill],
    events,
    // Lag seconds of owned partitions from the records this instance holds, no broker read; and only
    // owned partitions, so a sample never joins a throwaway group (the owners report the others).
    inFlight,
    ownedPartitionsOnly: true,
    intervalMs: config.observability.lagIntervalMs,
    logger: logger.child({ component: "lag-monitor" }),
  });

  // Subscribes to partition/transaction/lag events, so it must exist before the processor starts.
  const heartbeat = new HeartbeatPublisher({
    sink: new KafkaHeartbeatSink(kafka, { topic: config.topics.freshness }),
    events,
    groupId: config.consumer.groupId,
    instanceId: config.observability.instanceId,
    intervalMs: config.observability.heartbeatIntervalMs,
    logger: logger.child({ component: "freshness-heartbeat" }),
    onAccessFailure: refused,
  });

  let stopping: Promise<void> | undefined;
  const close = (): Promise<void> => {
    stopping ??= (async () => {
      await lag.stop().catch(() => undefined);
      // Bounded (shutdown.timeoutMs): what does not finish in time is left to the next owner.
      await processor.close({ timeoutMs: config.shutdown.timeoutMs });
      // The last spans (the final commits') go out; at most tracing.exportTimeoutMs when the collector hangs.
      await tracing.shutdown();
      await heartbeat.stop().catch(() => undefined);
      await server.stop();
      await runOffsets.close();
      detachRequests();
      detachMetrics();
      detachBatchLog();
      detachDeadLetterLog();
      detachLifecycleLog();
      inFlight.detach();
      await feed.stop();
      await models.close();
    })();
    return stopping;
  };
  processor.onFatal(stopOnFailure);
  const fatal = failed;
  try {
    await heartbeat.start();
    await processor.start();
    lag.start();
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
  const host = bound.host === "0.0.0.0" || bound.host === "::" ? "127.0.0.1" : bound.host;
  return { processor, events, model, models, metricsUrl: `http://${host}:${bound.port}`, fatal, close };
}

/** The live page's snapshot: metrics, this instance's assignment, and the backfill runs when there are any. */
function liveSnapshot(
  config: SluiceConfig,
  kafka: KafkaClient,
  metrics: SluiceMetrics,
  processor: StreamProcessor,
  offsets: KafkaGroupOffsetsReader,
): () => Promise<unknown> {
  const backfill = new Set(config.topics.backfill);
  const board =
    backfill.size > 0
      ? new BackfillRunBoard({
          source: new RunManifestFeed(kafka, config.topics.runs),
          offsets,
          groupId: config.consumer.groupId,
        })
      : undefined;
  const snapshot = new LiveSnapshot({
    registry: metrics.registry,
    instanceId: config.observability.instanceId,
    assignment: () =>
      processor.assignment().map((p) => ({ ...p, lane: backfill.has(p.topic) ? "backfill" : "online" })),
    ...(board ? { runs: () => board.view() } : {}),
  });
  return () => snapshot.build();
}

/**
 * The control topic, its feed and the switch: creates `topics.modelControl`, reads it to the end, and
 * routes each new decision to the switch; refusals are ERROR lines naming what to set.
 */
async function startModelSwitch(
  config: SluiceConfig,
  kafka: KafkaClient,
  models: ModelSet,
  events: SluiceEvents,
  logger: Logger,
): Promise<{ modelSwitch: ModelSwitch; feed: ModelControlFeed }> {
  const log = logger.child({ component: "model-switch" });
  // Without it no decision exists yet; the feed then waits for the first promote to create it.
  await createOrWarn(
    new ModelControlStore({
      kafka,
      topic: config.topics.modelControl,
      replicationFactor: config.topics.replicationFactor,
    }),
    log,
    "cannot create the model control topic (topics.modelControl); online answers with the model section until the first promote creates it",
  );
  const feed = new ModelControlFeed({
    kafka,
    topic: config.topics.modelControl,
    groupId: config.consumer.groupId,
    startTimeoutMs: config.consumer.restoreTimeoutMs,
    onFollowError: (err, retrying) =>
      retrying
        ? log.warn({ err }, "reading the model control topic failed; reading on from where it was in 1 s")
        : log.error(
            { err },
            "reading the model control topic (topics.modelControl) was refused: this instance no longer sees model decisions; grant READ on it (`sluice acls`) and restart",
          ),
  });
  await feed.start();
  const candidate = models.candidate?.model.identity.version;
  const online = (version: string) =>
    events.emit("model.online", { version, ...(candidate ? { candidate } : {}) });
  const modelSwitch = new ModelSwitch(models, {
    groupId: config.consumer.groupId,
    instanceId: config.observability.instanceId,
    controlTopic: config.topics.modelControl,
    decision: () => feed.decision(),
    report: {
      switched: (b) => {
        events.emit("model.switched", {
          topic: b.topic,
          partition: b.partition,
          offset: b.offset,
          version: b.version,
          seq: b.seq,
        });
        log.info(
          {
            topic: b.topic,
            partition: b.partition,
            offset: b.offset,
            version: b.version,
            previousVersion: b.previousVersion,
            seq: b.seq,
          },
          "partition switched model at its boundary",
        );
      },
      refused: (tp, message) => log.error({ code: "MODEL_VERSION_UNAVAILABLE", ...tp }, message),
    },
  });
  const decided = feed.decision();
  if (decided && models.byVersion(decided.version) === undefined)
    log.error(
      { code: "MODEL_VERSION_UNAVAILABLE", version: decided.version, have: models.versions() },
      `the group answers online with model version ${decided.version} (decision ${decided.seq}), which this instance has not loaded: its online partitions stay paused; set candidate.path or model.path to that model, or roll back`,
    );
  online(modelSwitch.onlineVersion());
  feed.onDecision((d) => {
    log.info(
      { seq: d.seq, action: d.action, version: d.version, previousVersion: d.previousVersion },
      "model decision read; switching online partitions at their next offset",
    );
    modelSwitch.onDecision(d);
    online(d.version);
  });
  return { modelSwitch, feed };
}

/** Creates a topic serve may go without for now (it may lack CREATE): a warning instead of a stop. */
async function createOrWarn(
  store: { topic: string; ensureTopic(): Promise<void> },
  logger: Logger,
  message: string,
): Promise<void> {
  await store
    .ensureTopic()
    .catch((error: unknown) =>
      logger.warn(
        { topic: store.topic, err: error instanceof Error ? error.message : String(error) },
        message,
      ),
    );
}
