import type { SluiceConfig } from "../config/config-schema.js";
import { RequestDecoder } from "../contracts/request-codec.js";
import { createKafka } from "../kafka/client/kafka-client.js";
import { KafkaRangeSource } from "../kafka/read/kafka-range-source.js";
import type { FeatureColumns } from "../runs/feature-rows.js";
import { FileSource, fileFormatOf } from "../runs/file-source.js";
import type { RowSource } from "../runs/row-source.js";
import { SluiceError } from "../sluice-error.js";

/*
 * The input side of a run, shared by the batch and backfill composition roots (a root imports no other
 * root): `--input` becomes a RowSource, and the input settings its manifest records.
 */

/** The input rows of a batch or backfill run: a file, or a topic range (`kafka:TOPIC`). */
export interface BatchSourceRequest {
  /** FILE.jsonl, FILE.csv or kafka:TOPIC. */
  input: string;
  /** File input format: jsonl or csv. Default: from the file extension. */
  inputFormat?: string;
  /** Default config batch.idField. */
  idField?: string;
  /** Default config batch.textField. */
  textField?: string;
  /** Tensor models, file inputs: feature columns read as one FP32 input (`--features a,b,c`). */
  features?: string[];
  /** The model input `features` feed (`--feature-input`). */
  featureInput?: string;
  /** Topic inputs only: range start and (exclusive) end specs (src/runs/offset-spec.ts). */
  from?: string;
  to?: string;
}

/**
 * The input settings a manifest's config records (they change which rows and texts a run sees):
 * the input format (jsonl, csv, kafka-json, kafka-avro, kafka-avro-registry) and the id/text fields.
 */
export interface InputSettings {
  inputFormat: string;
  idField: string;
  textField: string;
  /** `--features` and `--feature-input`, when given. */
  features?: string;
}

/**
 * The source for `--input`, shared by `sluice batch` and `sluice backfill submit`, with the input
 * settings it was built from (flags, else config). Topic inputs decode with `decoder`
 * (src/app/wire-codecs.ts) when given, needed for avro-registry.
 */
export function createBatchSource(
  config: SluiceConfig,
  request: BatchSourceRequest,
  decoder?: RequestDecoder,
): { source: RowSource; inputSettings: InputSettings } {
  const idField = request.idField ?? config.batch.idField;
  const textField = request.textField ?? config.batch.textField;
  const inputTopic = kafkaTopic(request.input, "--input");
  if (inputTopic !== null) {
    const source = new KafkaRangeSource({
      kafka: createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-batch` }),
      topic: inputTopic,
      from: request.from ?? null,
      to: request.to ?? null,
      decoder:
        decoder ??
        new RequestDecoder({
          defaultCodec: config.topics.requestCodec,
          maxMessageBytes: config.delivery.maxMessageBytes,
          servedModel: config.model.name,
        }),
    });
    return {
      source,
      inputSettings: { inputFormat: `kafka-${config.topics.requestCodec}`, idField, textField },
    };
  }
  if (request.from || request.to) {
    throw new SluiceError("CONFIG_INVALID", "--from/--to/--range apply to kafka:TOPIC inputs only");
  }
  const format = oneOf(
    request.inputFormat ?? fileFormatOf(request.input),
    ["jsonl", "csv"],
    "--input-format",
  );
  const features = featureColumnsOf(request);
  return {
    source: new FileSource({
      path: request.input,
      format,
      idField,
      textField,
      ...(features ? { features } : {}),
    }),
    inputSettings: {
      inputFormat: format,
      idField,
      textField,
      ...(features ? { features: `${features.input}=${features.columns.join(",")}` } : {}),
    },
  };
}

function featureColumnsOf(request: BatchSourceRequest): FeatureColumns | undefined {
  if (request.features === undefined || request.features.length === 0) return undefined;
  if (request.featureInput === undefined) {
    throw new SluiceError(
      "CONFIG_INVALID",
      "--features needs --feature-input NAME: the model input the columns feed (`sluice model info` lists them)",
    );
  }
  return { columns: request.features, input: request.featureInput };
}

/** `kafka:TOPIC` → TOPIC; anything else is a path → null. */
export function kafkaTopic(spec: string, flag: "--input" | "--output"): string | null {
  if (!spec.startsWith("kafka:")) return null;
  const topic = spec.slice("kafka:".length);
  if (!topic) throw new SluiceError("CONFIG_INVALID", `${flag} kafka:TOPIC needs a topic name`);
  return topic;
}

/** `value` when it is one of `allowed`, else CONFIG_INVALID naming the flag. */
export function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new SluiceError("CONFIG_INVALID", `${flag} must be ${allowed.join(" or ")}, got ${value}`);
}
