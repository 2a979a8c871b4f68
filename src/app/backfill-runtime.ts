import { BackfillSubmission, type SubmissionSummary } from "../backfill/backfill-submission.js";
import { type ExportSummary, exportRun } from "../backfill/run-export.js";
import { assertRunId, type ExpectedModel, type RunManifest, unknownRun } from "../backfill/run-manifest.js";
import { type RunStatusReport, summarizeRun } from "../backfill/run-outcomes.js";
import { backfillResultsTopic, type SluiceConfig } from "../config/config-schema.js";
import { createKafka } from "../kafka/client/kafka-client.js";
import { KafkaRunWriter } from "../kafka/runs/backfill-run-writer.js";
import { RunManifestStore } from "../kafka/runs/run-manifest-store.js";
import { RunOutcomeReader } from "../kafka/runs/run-outcome-reader.js";
import type { ModelRole } from "../model/model-set.js";
import { type RunCost, runCost } from "../runs/run-cost.js";
import { sumRunCostShares } from "../runs/run-cost-total.js";
import { hashConfig, sluiceBuild } from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";
import { modelOutputSettings } from "./model-output-settings.js";
import { configuredModelVersion, roleConfig } from "./model-versions.js";
import { type BatchSourceRequest, createBatchSource } from "./run-source.js";
import { createWireCodecs } from "./wire-codecs.js";

/**
 * `sluice backfill submit` as the CLI asks for it: unset optional fields come from the configuration;
 * `chunkRows` is the CLI's (`--chunk-rows` holds its default).
 */
export interface BackfillSubmitRequest extends BatchSourceRequest {
  runId: string;
  /** Input rows per submit transaction. */
  chunkRows: number;
  /**
   * Which model scores the run (`--model`): `serving` (default) = the version online answers with;
   * `candidate` = the `candidate` section's model, its version recorded in the manifest and on every
   * row (docs/model-upgrades.md).
   */
  model?: ModelRole;
}

/**
 * Composition roots of `sluice backfill submit|status|export` (docs/lanes.md, "Backfill runs"):
 * the Kafka adapters (run writer, manifest store, outcome reader) wired to the backfill domain
 * (`BackfillSubmission`, `summarizeRun`, `exportRun`) from one configuration. Wiring only.
 */
export async function submitBackfill(
  config: SluiceConfig,
  request: BackfillSubmitRequest,
  onChunk?: (manifest: RunManifest) => void,
): Promise<SubmissionSummary> {
  assertRunId(request.runId);
  const backfillTopic = config.topics.backfill[0];
  if (backfillTopic === undefined) {
    throw new SluiceError(
      "CONFIG_INVALID",
      "topics.backfill is empty: name the backfill topic the serve group consumes (SLUICE_TOPICS__BACKFILL or topics.backfill in the config)",
    );
  }
  // A topic input decodes with serve's wire codecs (schema registry included).
  const decoder = request.input.startsWith("kafka:")
    ? (await createWireCodecs(config)).requestDecoder
    : undefined;
  const { source, inputSettings } = createBatchSource(config, request, decoder);
  const kafka = createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-backfill` });
  const store = runStore(config);
  const writer = new KafkaRunWriter({
    kafka,
    runId: request.runId,
    backfillTopic,
    store,
    transactionTimeoutMs: config.delivery.transactionTimeoutMs,
    maxTransactionBytes: config.delivery.maxTransactionBytes,
  });
  const role = request.model ?? "serving";
  const scoring = roleConfig(config, role, "--model candidate");
  // Everything here changes what the model returns for a row; the model files are its version.
  const outputConfig = {
    ...modelOutputSettings(scoring),
    ...inputSettings,
    requestCodec: config.topics.requestCodec,
  };
  try {
    return await new BackfillSubmission({
      source,
      writer,
      // Backfill rows are Sluice's own records: with avro-registry they are written as bare Avro with
      // a content-type header, which serve's decoder selects by header (no registry id needed).
      codec: config.topics.requestCodec === "avro-registry" ? "avro" : config.topics.requestCodec,
      chunkRows: request.chunkRows,
      maxRecordBytes: config.delivery.maxMessageBytes,
      submittedIds: async (manifest) =>
        (await outcomeReader(config).submittedRows(manifest)).map((r) => r.id),
      onChunk,
      run: {
        runId: request.runId,
        sluice: sluiceBuild(),
        topics: {
          backfill: backfillTopic,
          results: backfillResultsTopic(config.topics),
          deadLetters: config.topics.deadLetters,
        },
        model: await runModel(scoring, role),
        config: outputConfig,
        configHash: hashConfig(outputConfig),
      },
    }).run();
  } finally {
    await Promise.allSettled([writer.close(), source.close()]);
  }
}

/** `sluice backfill status ID`: progress from the manifest and the committed results and dead letters. */
export async function backfillStatus(
  config: SluiceConfig,
  runId: string,
): Promise<RunStatusReport & { cost: RunCost }> {
  const { manifest, cost } = await requireRun(config, runId);
  const outcomes = await outcomeReader(config).outcomes(manifest);
  return { ...summarizeRun(manifest, outcomes), cost };
}

/** `sluice backfill export ID --output DIR`, `partRows` input rows per part file (`--part-rows`). */
export async function exportBackfill(
  config: SluiceConfig,
  runId: string,
  dir: string,
  partRows: number,
): Promise<ExportSummary & { cost: RunCost }> {
  const { manifest, cost } = await requireRun(config, runId);
  const reader = outcomeReader(config);
  const outcomes = await reader.outcomes(manifest);
  const submitted = await reader.submittedRows(manifest);
  return { ...(await exportRun({ dir, manifest, submitted, outcomes, partRows, cost })), cost };
}

/** The run's manifest and its cost: the committed shares of every serve instance, summed. */
async function requireRun(
  config: SluiceConfig,
  runId: string,
): Promise<{ manifest: RunManifest; cost: RunCost }> {
  assertRunId(runId);
  const { manifest, costShares } = await runStore(config).read(runId);
  if (!manifest) throw unknownRun(runId, config.topics.runs);
  return { manifest, cost: runCost(sumRunCostShares(runId, costShares), config.cost) };
}

function runStore(config: SluiceConfig): RunManifestStore {
  return new RunManifestStore({
    kafka: createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-runs` }),
    topic: config.topics.runs,
    replicationFactor: config.topics.replicationFactor,
  });
}

function outcomeReader(config: SluiceConfig): RunOutcomeReader {
  return new RunOutcomeReader(
    createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-backfill-status` }),
  );
}

/**
 * The run's model in its manifest. A candidate run records its role, and its version must be known:
 * every row carries it, and serve scores the rows with exactly that version (docs/model-upgrades.md).
 */
async function runModel(scoring: SluiceConfig, role: ModelRole): Promise<ExpectedModel> {
  const expectedVersion = await expectedModelVersion(scoring);
  if (role === "serving") return { name: scoring.model.name, expectedVersion };
  if (expectedVersion === null) {
    throw new SluiceError(
      "MODEL_NOT_FOUND",
      "--model candidate: the candidate's model files cannot be read here, so its version is unknown; run submit where candidate.path points at the same file as on the serve instances",
    );
  }
  return { name: scoring.model.name, expectedVersion, role };
}

/**
 * The version results of this configuration will carry (the same fingerprint `TextModelRunner` reports),
 * recorded in the manifest so `status` can flag results from another model. The default model is
 * fetched once if absent, as `serve` would; a model that cannot be read gives null (unknown).
 */
async function expectedModelVersion(config: SluiceConfig): Promise<string | null> {
  try {
    return await configuredModelVersion(config);
  } catch (error) {
    process.stderr.write(
      `backfill: cannot read the configured model (${(error as Error).message}); the run records no expected model version\n`,
    );
    return null;
  }
}
