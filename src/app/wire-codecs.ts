import type { SluiceConfig } from "../config/config-schema.js";
import { RequestDecoder } from "../contracts/request-codec.js";
import { RequestWriterSchemas } from "../contracts/request-writer-schemas.js";
import { ResultEncoder } from "../contracts/result-codec.js";
import type { SchemaRegistryClient } from "../registry/schema-registry-client.js";

/**
 * The one place the configured wire codecs are built (`topics.requestCodec`, `topics.resultCodec`,
 * `schemaRegistry`), shared by `sluice serve`, `sluice batch` Kafka inputs/outputs and any other
 * runtime that reads requests or writes results to Kafka (backfill), so they all speak the same format.
 *
 * With the avro-registry codec the start-up work happens here: the registry is probed (unreachable,
 * wrong credentials or a bad CA fail now, naming the URL and the cause) and the result schema is
 * registered, after a BACKWARD compatibility check, under the output topic's subject. Afterwards
 * encoding and decoding are synchronous; only request schema ids never seen before cost a lookup.
 */
export interface WireCodecs {
  /** Decoder of request records; registry writer schemas are looked up (and cached) on demand. */
  requestDecoder: RequestDecoder;
  /** Encoder of results for `topic` (for avro-registry: registers the result schema under its subject). */
  resultEncoder(topic: string): Promise<ResultEncoder>;
  /** The registry in use, undefined when none is configured. */
  registryUrl: string | undefined;
}

export async function createWireCodecs(config: SluiceConfig): Promise<WireCodecs> {
  const { requestCodec, resultCodec } = config.topics;
  const usesRegistry = requestCodec === "avro-registry" || resultCodec === "avro-registry";
  // Loaded only with a registry configured: its client (with ajv and protobufjs) cost every start a
  // few tens of ms to load (BENCHMARKS.md, "A partition's restore").
  const Registry =
    config.schemaRegistry.url === undefined
      ? undefined
      : (await import("../registry/schema-registry-client.js")).SchemaRegistryClient;
  const registry = Registry?.create(config.schemaRegistry);
  if (usesRegistry) await (registry as SchemaRegistryClient).probe();
  const requestDecoder = new RequestDecoder({
    defaultCodec: requestCodec,
    maxMessageBytes: config.delivery.maxMessageBytes,
    servedModel: config.model.name,
    ...(registry ? { writerSchemas: new RequestWriterSchemas((id) => registry.writerSchema(id)) } : {}),
  });
  const encoders = new Map<string, Promise<ResultEncoder>>();
  const resultEncoder = (topic: string): Promise<ResultEncoder> => {
    let encoder = encoders.get(topic);
    if (encoder === undefined) {
      encoder =
        resultCodec === "avro-registry"
          ? (registry as SchemaRegistryClient)
              .registerResultSchema(
                (Registry as typeof SchemaRegistryClient).resultSubject(
                  topic,
                  config.schemaRegistry.subjectNameStrategy,
                ),
              )
              .then((registrySchemaId) => new ResultEncoder({ codec: resultCodec, registrySchemaId }))
          : Promise.resolve(new ResultEncoder({ codec: resultCodec }));
      encoders.set(topic, encoder);
      encoder.catch(() => encoders.delete(topic));
    }
    return encoder;
  };
  return { requestDecoder, resultEncoder, registryUrl: registry?.url };
}
