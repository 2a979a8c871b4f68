/**
 * The Confluent Schema Registry wire format, which the standard Kafka serializers write and their
 * deserializers expect: magic byte 0, the writer schema's registry id as a 4-byte big-endian
 * integer, then the Avro binary encoding of the value
 * (https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/index.html#wire-format).
 */
export const REGISTRY_MAGIC_BYTE = 0;
export const REGISTRY_HEADER_BYTES = 5;

export type RegistryFrame =
  | { ok: true; schemaId: number; payload: Buffer }
  | { ok: false; reason: "too-short" | "wrong-magic-byte"; magicByte?: number };

/** Splits a registry-framed value into its schema id and Avro payload. */
export function parseRegistryFrame(value: Buffer): RegistryFrame {
  if (value.length < REGISTRY_HEADER_BYTES) return { ok: false, reason: "too-short" };
  const magicByte = value.readUInt8(0);
  if (magicByte !== REGISTRY_MAGIC_BYTE) return { ok: false, reason: "wrong-magic-byte", magicByte };
  return { ok: true, schemaId: value.readInt32BE(1), payload: value.subarray(REGISTRY_HEADER_BYTES) };
}

/** The schema id of a registry-framed value, or undefined when it is not one. */
export function registrySchemaIdOf(value: Buffer | null | undefined): number | undefined {
  if (!value) return undefined;
  const frame = parseRegistryFrame(value);
  return frame.ok ? frame.schemaId : undefined;
}

/** Prefixes an Avro payload with the magic byte and schema id. */
export function frameRegistryPayload(schemaId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(REGISTRY_HEADER_BYTES);
  header.writeUInt8(REGISTRY_MAGIC_BYTE, 0);
  header.writeInt32BE(schemaId, 1);
  return Buffer.concat([header, payload]);
}
