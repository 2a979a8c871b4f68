import {
  maxBatchSize,
  type SluiceConfig,
  type SluiceConfigInput,
  sluiceConfigSchema,
} from "../config/config-schema.js";
import type { Codec } from "../contracts/codec.js";
import type { RequestDecoder } from "../contracts/request-codec.js";
import type { ResultEncoder } from "../contracts/result-codec.js";
import type { SluiceEvents } from "../events/sluice-events.js";
import type { KafkaClient } from "../kafka/client/kafka-client.js";
import type { ModelPort } from "../model/model-port.js";
import { SluiceError } from "../sluice-error.js";
import { NO_TRACING_TRACER, type PipelineTracer } from "../tracing/pipeline-tracer.js";
import type { ModelRouter } from "./model-router.js";

/** Structured log sink (a pino logger fits). Never pass request text in `obj`. */
export interface ProcessorLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * The processor's settings. Each maps to one configuration key (`SETTING_KEYS`); its default, unit
 * and rules are that key's in src/config/config-schema.ts and docs/configuration.md.
 */
export interface ProcessorSettings {
  groupId: string;
  requestTopics: string[];
  /** The backfill lane's topics (docs/lanes.md); consumed by the same group, after online work. */
  backfillTopics: string[];
  resultsTopic: string;
  /** Where backfill-lane results go (`topics.backfillResults`; unset = `resultsTopic`). */
  backfillResultsTopic?: string;
  deadLetterTopic: string;
  /** `topics.runs`: where backfill-lane transactions write their run's cost share. */
  runsTopic: string;
  /** Base name; the changelog of request topic T is `<base>.<groupId>.<T>` (see topic-admin.ts). */
  dedupChangelogBase: string;
  /** Codec for request records without a content-type header. */
  requestCodec: Codec;
  resultCodec: Codec;
  maxMessageBytes: number;
  defaultTimeoutMs: number;
  dedupTtlMs: number;
  /** Per instance, divided evenly over the assigned input partitions (floor, at least 1 each). */
  dedupMaxEntries: number;
  maxBatchSize: number;
  maxBatchTokens: number;
  maxWaitMs: number;
  maxInFlightBatches: number;
  maxQueuedRecords: number;
  transactions: boolean;
  commitIntervalMs: number;
  transactionTimeoutMs: number;
  maxTransactionRecords: number;
  maxTransactionBytes: number;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  maxBytesPerPartition: number;
  restoreTimeoutMs: number;
  restoreRetryMs: number;
  /** First wait before retrying a registry schema lookup that failed, ms (doubles per try). */
  schemaRetryInitialMs: number;
  /** Longest wait between registry schema lookup retries, ms. */
  schemaRetryMaxMs: number;
  /** Fallback rules file (docs/lanes.md); unset = no fallback. */
  fallbackRulesPath?: string;
  fallbackMaxOnlineQueue: number;
  /** The backfill lane's SLO guard on (docs/lanes.md); acts only with backfill topics. */
  backfillGuard: boolean;
  /** Online latency target of the guard, ms, or auto (`onlineLatencyTargetMs` in config-schema.ts). */
  onlineLatencyTargetMs: number | "auto";
  /** Commit interval of backfill partitions, ms (`commitIntervalMs` is the online lane's). */
  backfillCommitIntervalMs: number;
  /** The backfill lane's CPU budget, cores, or auto (`backfillCpuCores` in lanes-config-schema.ts). */
  backfillCpuCores: number | "auto";
  /** Idle CPU the backfill lane leaves, cores, or auto (`cpuHeadroomCores` in lanes-config-schema.ts). */
  cpuHeadroomCores: number | "auto";
}

/** Where each setting lives in the configuration (the one home of its default and rules). */
const SETTING_KEYS = {
  groupId: ["consumer", "groupId"],
  requestTopics: ["topics", "requests"],
  backfillTopics: ["topics", "backfill"],
  resultsTopic: ["topics", "results"],
  backfillResultsTopic: ["topics", "backfillResults"],
  deadLetterTopic: ["topics", "deadLetters"],
  runsTopic: ["topics", "runs"],
  dedupChangelogBase: ["topics", "dedupChangelog"],
  requestCodec: ["topics", "requestCodec"],
  resultCodec: ["topics", "resultCodec"],
  maxMessageBytes: ["delivery", "maxMessageBytes"],
  defaultTimeoutMs: ["delivery", "defaultTimeoutMs"],
  dedupTtlMs: ["delivery", "dedupTtlMs"],
  dedupMaxEntries: ["delivery", "dedupMaxEntries"],
  maxBatchSize: ["batching", "maxBatchSize"],
  maxBatchTokens: ["batching", "maxBatchTokens"],
  maxWaitMs: ["batching", "maxWaitMs"],
  maxInFlightBatches: ["batching", "maxInFlightBatches"],
  maxQueuedRecords: ["batching", "maxQueuedRecords"],
  transactions: ["delivery", "transactions"],
  commitIntervalMs: ["delivery", "commitIntervalMs"],
  transactionTimeoutMs: ["delivery", "transactionTimeoutMs"],
  maxTransactionRecords: ["delivery", "maxTransactionRecords"],
  maxTransactionBytes: ["delivery", "maxTransactionBytes"],
  sessionTimeoutMs: ["consumer", "sessionTimeoutMs"],
  heartbeatIntervalMs: ["consumer", "heartbeatIntervalMs"],
  maxBytesPerPartition: ["consumer", "maxBytesPerPartition"],
  restoreTimeoutMs: ["consumer", "restoreTimeoutMs"],
  restoreRetryMs: ["consumer", "restoreRetryMs"],
  schemaRetryInitialMs: ["schemaRegistry", "retryInitialMs"],
  schemaRetryMaxMs: ["schemaRegistry", "retryMaxMs"],
  fallbackRulesPath: ["fallback", "rulesPath"],
  fallbackMaxOnlineQueue: ["fallback", "maxOnlineQueue"],
  backfillGuard: ["lanes", "guard"],
  onlineLatencyTargetMs: ["lanes", "onlineLatencyTargetMs"],
  backfillCommitIntervalMs: ["lanes", "backfillCommitIntervalMs"],
  backfillCpuCores: ["lanes", "backfillCpuCores"],
  cpuHeadroomCores: ["lanes", "cpuHeadroomCores"],
} as const satisfies Record<keyof ProcessorSettings, readonly [string, string]>;

type SettingName = keyof typeof SETTING_KEYS;
const SETTING_NAMES = Object.keys(SETTING_KEYS) as SettingName[];

export interface ProcessorDeps {
  kafka: KafkaClient;
  /** Loaded model; the processor does not close it (its creator does). */
  model: ModelPort;
  /** Which loaded model answers each item (docs/model-upgrades.md); unset = `model` answers all. */
  router?: ModelRouter;
  /**
   * Shadow scoring (docs/model-upgrades.md): `share` of online requests also scored by `candidate`,
   * their results to `topic`. Unset = none.
   */
  shadow?: { candidate: ModelPort; share: number; topic: string };
  events: SluiceEvents;
  log?: ProcessorLog;
  /**
   * Request decoder and result encoder, built once per configuration (src/app/wire-codecs.ts); needed
   * for the avro-registry codec, which talks to the schema registry at start-up. Default: plain codecs
   * from requestCodec/resultCodec.
   */
  codecs?: ProcessorCodecs;
  /**
   * The spans of each request, micro-batch and transaction (`createTracing(...).tracer`,
   * docs/observability.md "Tracing"). Default: tracing off (the do-nothing tracer).
   */
  tracer?: PipelineTracer;
}

export interface ProcessorCodecs {
  requestDecoder: RequestDecoder;
  resultEncoder: ResultEncoder;
  /**
   * Encoder of backfill-lane results when they go to their own topic (`topics.backfillResults`): with
   * avro-registry its schema id is registered under that topic's subject. Default: `resultEncoder`.
   */
  backfillResultEncoder?: ResultEncoder;
}

/**
 * What a program (a test, a benchmark, an embedding application) gives to build a processor: the
 * collaborators plus any settings; the others take the configuration's defaults.
 */
export type StreamProcessorOptions = ProcessorDeps &
  Pick<
    ProcessorSettings,
    "groupId" | "requestTopics" | "resultsTopic" | "deadLetterTopic" | "dedupChangelogBase"
  > &
  Partial<ProcessorSettings>;

export type ResolvedProcessorOptions = ProcessorSettings &
  Required<Omit<ProcessorDeps, "codecs" | "router" | "shadow">> &
  Pick<ProcessorDeps, "codecs" | "router" | "shadow">;

const silentLog: ProcessorLog = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * Validates programmatic options once, through the configuration schema, so defaults and
 * cross-field rules have one home; errors name the option (not the configuration key).
 */
export function resolveProcessorOptions(o: StreamProcessorOptions): ResolvedProcessorOptions {
  const input: Record<string, Record<string, unknown>> = {};
  for (const name of SETTING_NAMES) {
    const value = o[name];
    if (value === undefined) continue;
    const [section, key] = SETTING_KEYS[name];
    input[section] ??= {};
    (input[section] as Record<string, unknown>)[key] = value;
  }
  // The model is already loaded here and truncates by itself; the configuration's rule that a batch
  // fits one full-length request (batching.maxBatchTokens >= model.maxSequenceTokens) is about the
  // configured model, so it must not judge programmatic options against the default sequence length.
  // Its task is what batching.maxBatchSize's auto follows.
  input["model"] = { maxSequenceTokens: 1, task: o.model.task };
  // The avro-registry codecs arrive ready-made (`codecs`, which reach the registry); the
  // configuration's rule that such a codec needs schemaRegistry.url is about the configuration.
  for (const key of ["requestCodec", "resultCodec"] as const) {
    if (o[key] === "avro-registry" && o.codecs === undefined) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `StreamProcessor: ${key} avro-registry needs codecs that reach the schema registry; pass codecs from createWireCodecs(config)`,
      );
    }
  }
  if (o.codecs !== undefined)
    input["schemaRegistry"] = { ...input["schemaRegistry"], url: "http://codecs.given/" };
  const parsed = sluiceConfigSchema.safeParse(input as SluiceConfigInput);
  if (!parsed.success) {
    const issue = parsed.error.issues[0] as (typeof parsed.error.issues)[number];
    const name = settingAt(issue.path.map(String)) ?? issue.path.join(".");
    const value = (o as unknown as Record<string, unknown>)[name];
    throw new SluiceError(
      "CONFIG_INVALID",
      `StreamProcessor: ${name} ${optionNames(issue.message)}, got ${JSON.stringify(value) ?? String(value)}`,
    );
  }
  const settings = settingsFromConfig(parsed.data);
  return {
    ...settings,
    ...(o.codecs ? { codecs: o.codecs } : {}),
    ...(o.router ? { router: o.router } : {}),
    ...(o.shadow ? { shadow: o.shadow } : {}),
    kafka: o.kafka,
    model: o.model,
    events: o.events,
    log: o.log ?? silentLog,
    tracer: o.tracer ?? NO_TRACING_TRACER,
  };
}

/** Every processor setting read from the loaded configuration. */
export function settingsFromConfig(config: SluiceConfig): ProcessorSettings {
  const out: Record<string, unknown> = {};
  for (const name of SETTING_NAMES) {
    const [section, key] = SETTING_KEYS[name];
    const value = (config as unknown as Record<string, Record<string, unknown>>)[section]?.[key];
    out[name] = Array.isArray(value) ? [...value] : value;
  }
  // `auto` resolved for the configured model's task (the one home of that rule: config-schema.ts).
  out["maxBatchSize"] = maxBatchSize(config.batching, config.model.task);
  return out as unknown as ProcessorSettings;
}

/** Options from the loaded configuration (`sluice serve`, `sluice demo`). */
export function processorOptionsFromConfig(
  config: SluiceConfig,
  deps: ProcessorDeps,
): StreamProcessorOptions {
  return { ...deps, ...settingsFromConfig(config) };
}

function settingAt(path: string[]): SettingName | undefined {
  return SETTING_NAMES.find((n) => SETTING_KEYS[n][0] === path[0] && SETTING_KEYS[n][1] === path[1]);
}

/** Rewrites configuration keys named in a rule's message (`delivery.transactionTimeoutMs`) as options. */
function optionNames(message: string): string {
  let out = message;
  for (const name of SETTING_NAMES) out = out.replaceAll(SETTING_KEYS[name].join("."), name);
  return out;
}
