import {
  changedConfigKeys,
  type InputDescription,
  inputChange,
  type RunProvenance,
} from "../runs/run-provenance.js";
import { SluiceError } from "../sluice-error.js";

/**
 * The manifest of a backfill run (docs/lanes.md, "Backfill runs"): what `sluice backfill submit` read,
 * where it wrote it and how far it got. It lives in the compacted `topics.runs` topic keyed by run id
 * and is written in the same Kafka transaction as the rows it accounts for, so the last committed
 * manifest always says exactly which input rows are on the backfill topic: a resumed submit starts at
 * `rowsRead`, and rows of an aborted transaction are invisible to `read_committed` readers (`serve`).
 */
export const RUN_MANIFEST_FORMAT_VERSION = 1;

/**
 * Rows that could not be submitted (no id, undecodable, non-string text, too large) are listed up to
 * this many, each message cut to MAX_INVALID_MESSAGE_CHARS, so a manifest stays far below the broker's
 * default 1 MiB record limit (it must fit one record of the runs topic).
 */
export const MAX_LISTED_INVALID_ROWS = 1000;
export const MAX_INVALID_MESSAGE_CHARS = 200;

export type RunStatus = "submitting" | "submitted";

/** The run's records on one backfill partition: offsets [startOffset, endOffset), `records` of them. */
export interface RunPartitionRange {
  partition: number;
  startOffset: string;
  endOffset: string;
  records: number;
}

export interface InvalidRow {
  row: number;
  code: string;
  message: string;
}

/**
 * The model a backfill run expects its results from: the provenance's model part. `serve` does the
 * scoring, so the run knows the configured model's name and version, not the version that answered.
 */
export interface ExpectedModel {
  name: string;
  /** 12 hex of SHA-256 over model + tokenizer, as results carry it; null when the model was not readable. */
  expectedVersion: string | null;
  /**
   * `candidate`: submitted with `--model candidate`; every row carries `expectedVersion` and serve
   * scores it with exactly that version (docs/model-upgrades.md). Absent: the version online answers with.
   */
  role?: "serving" | "candidate";
}

/** `config` holds the settings that change outputs (task, pooling, …, id/text fields, request codec). */
export interface RunManifest extends RunProvenance<ExpectedModel> {
  formatVersion: number;
  runId: string;
  status: RunStatus;
  createdAt: string;
  updatedAt: string;
  /** Where the rows went and where their outcomes go. */
  topics: { backfill: string; results: string; deadLetters: string };
  /** Input rows handled so far (submitted or invalid): the resume point. */
  rowsRead: number;
  rowsSubmitted: number;
  rowsInvalid: number;
  /** The first MAX_LISTED_INVALID_ROWS invalid rows. */
  invalid: InvalidRow[];
  /** Per backfill partition, the offsets holding this run's records. */
  partitions: RunPartitionRange[];
  /** Committed submit transactions (chunks). */
  transactions: number;
}

/** Where one chunk's records landed on one partition (from the produce response). */
export interface PlacedRecords {
  partition: number;
  baseOffset: string;
  count: number;
}

/** Run ids become part of transactional ids and file names: keep them to Kafka's topic alphabet. */
export function assertRunId(runId: string): void {
  if (!/^[a-zA-Z0-9._-]{1,100}$/.test(runId)) {
    throw new SluiceError(
      "CONFIG_INVALID",
      `--run-id "${runId}" is not valid: use 1–100 letters, digits, '.', '_' or '-' (e.g. reembed-2026-12-01)`,
    );
  }
}

export function newRunManifest(
  fields: Pick<RunManifest, "runId" | "sluice" | "input" | "topics" | "model" | "config" | "configHash">,
  now: Date = new Date(),
): RunManifest {
  const at = now.toISOString();
  return {
    formatVersion: RUN_MANIFEST_FORMAT_VERSION,
    status: "submitting",
    createdAt: at,
    updatedAt: at,
    ...fields,
    rowsRead: 0,
    rowsSubmitted: 0,
    rowsInvalid: 0,
    invalid: [],
    partitions: [],
    transactions: 0,
  };
}

/**
 * Refuses to continue a run from a different input or with different outputs settings: the rows
 * already submitted would then not be the first rows of this input, and resuming at `rowsRead` would
 * silently mix two datasets under one run id.
 */
export function assertSameSubmission(
  existing: RunManifest,
  current: Pick<RunManifest, "input" | "topics" | "configHash" | "config"> &
    Partial<Pick<RunManifest, "model">>,
): void {
  const a = existing.input;
  const b = current.input;
  const run = `run ${existing.runId}`;
  const input = inputChange(a, b);
  if (input === "source") {
    throw mismatch(`${run} was submitted from ${a.uri}, not ${b.uri}: use a new --run-id for a new input`);
  }
  if (input === "content" && a.kind === "file" && b.kind === "file") {
    throw mismatch(
      `input file ${b.uri.replace(/^file:\/\//, "")} changed since ${run} was submitted from it (sha256 ${a.sha256.slice(0, 12)}… then, ${b.sha256.slice(0, 12)}… now); submit the new content under a new --run-id`,
    );
  }
  if (input === "ranges" && a.kind === "kafka") {
    throw mismatch(`${run} read other offset ranges of ${a.topic} (--range/--from/--to); use a new --run-id`);
  }
  if (existing.topics.backfill !== current.topics.backfill) {
    throw mismatch(
      `${run} was submitted to backfill topic ${existing.topics.backfill}, not ${current.topics.backfill} (topics.backfill)`,
    );
  }
  const role = (m: ExpectedModel) => m.role ?? "serving";
  if (current.model && role(existing.model) !== role(current.model)) {
    throw mismatch(
      `${run} was submitted with --model ${role(existing.model)}, not ${role(current.model)}; use a new --run-id`,
    );
  }
  if (
    current.model &&
    role(current.model) === "candidate" &&
    existing.model.expectedVersion !== current.model.expectedVersion
  ) {
    throw mismatch(
      `${run} was submitted for candidate version ${existing.model.expectedVersion}, and the candidate is ${current.model.expectedVersion} now; use a new --run-id`,
    );
  }
  if (existing.configHash !== current.configHash) {
    const changed = changedConfigKeys(existing.config, current.config);
    throw mismatch(
      `${run} was submitted with other output-affecting settings (${changed.join(", ") || "config hash"}); use a new --run-id`,
    );
  }
}

/** The manifest after one more committed chunk: `rowsRead` rows handled in total. Pure. */
export function withChunk(
  m: RunManifest,
  chunk: { rowsRead: number; placed: readonly PlacedRecords[]; invalid: readonly InvalidRow[] },
  now: Date = new Date(),
): RunManifest {
  const partitions = new Map(m.partitions.map((p) => [p.partition, { ...p }]));
  let submitted = 0;
  for (const p of chunk.placed) {
    if (p.count <= 0) continue;
    submitted += p.count;
    const end = (BigInt(p.baseOffset) + BigInt(p.count)).toString();
    const range = partitions.get(p.partition);
    if (range) {
      range.endOffset = BigInt(end) > BigInt(range.endOffset) ? end : range.endOffset;
      range.records += p.count;
    } else {
      partitions.set(p.partition, {
        partition: p.partition,
        startOffset: p.baseOffset,
        endOffset: end,
        records: p.count,
      });
    }
  }
  const room = Math.max(0, MAX_LISTED_INVALID_ROWS - m.invalid.length);
  return {
    ...m,
    updatedAt: now.toISOString(),
    rowsRead: chunk.rowsRead,
    rowsSubmitted: m.rowsSubmitted + submitted,
    rowsInvalid: m.rowsInvalid + chunk.invalid.length,
    invalid: [
      ...m.invalid,
      ...chunk.invalid
        .slice(0, room)
        .map((i) => ({ ...i, message: i.message.slice(0, MAX_INVALID_MESSAGE_CHARS) })),
    ],
    partitions: [...partitions.values()].sort((x, y) => x.partition - y.partition),
    transactions: m.transactions + 1,
  };
}

/** The manifest once every input row is handled. */
export function asSubmitted(m: RunManifest, input: InputDescription, now: Date = new Date()): RunManifest {
  const finalInput: InputDescription = input.kind === "kafka" ? { ...input, rows: m.rowsRead } : input;
  return { ...m, input: finalInput, status: "submitted", updatedAt: now.toISOString() };
}

export function encodeRunManifest(m: RunManifest): Buffer {
  return Buffer.from(JSON.stringify(m), "utf8");
}

/** Decodes a runs-topic record value; a record that is not a run manifest of this format is an error. */
export function decodeRunManifest(value: Buffer, where: string): RunManifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString("utf8"));
  } catch (cause) {
    throw new SluiceError("INPUT_INVALID", `${where} is not valid JSON; it is not a Sluice run manifest`, {
      cause,
    });
  }
  const m = parsed as Partial<RunManifest>;
  if (
    m === null ||
    typeof m !== "object" ||
    typeof m.runId !== "string" ||
    typeof m.rowsRead !== "number" ||
    !Array.isArray(m.partitions)
  ) {
    throw new SluiceError("INPUT_INVALID", `${where} is not a Sluice run manifest`);
  }
  if (m.formatVersion !== RUN_MANIFEST_FORMAT_VERSION) {
    throw new SluiceError(
      "MANIFEST_MISMATCH",
      `${where} has manifest format ${String(m.formatVersion)}, this Sluice reads ${RUN_MANIFEST_FORMAT_VERSION}; use a new --run-id or a matching Sluice version`,
    );
  }
  return m as RunManifest;
}

/** The error for an unknown run id (status, export). */
export function unknownRun(runId: string, runsTopic: string): SluiceError {
  return new SluiceError(
    "RUN_NOT_FOUND",
    `no backfill run "${runId}" in ${runsTopic} (topics.runs); check the id, or submit it with sluice backfill submit --run-id ${runId}`,
    { context: { runId, topic: runsTopic } },
  );
}

function mismatch(message: string): SluiceError {
  return new SluiceError("MANIFEST_MISMATCH", message);
}
