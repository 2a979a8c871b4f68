/**
 * Wire codecs and the `content-type` header that selects one per record. A record's header wins;
 * without one the topic's configured codec applies.
 */
export type Codec = "json" | "avro" | "avro-registry" | "v2-json";

/** Structurally the same as kafkajs `IHeaders`, so contracts need nothing from the Kafka layer. */
export type RecordHeaders = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

export const CONTENT_TYPE_HEADER = "content-type";

const CONTENT_TYPES: Record<Codec, string> = {
  json: "application/json",
  avro: "application/avro",
  // Not a registered media type: Sluice's label for the Confluent wire format (magic byte, schema id,
  // Avro binary; see registry-wire.ts). Standard deserializers ignore headers.
  "avro-registry": "application/vnd.confluent.avro",
  // The Open Inference Protocol's JSON (v2-json-codec.ts) is plain JSON on the wire, as MLServer writes it.
  "v2-json": "application/json",
};

/** The `content-type` value Sluice writes for a codec. */
export function contentTypeFor(codec: Codec): string {
  return CONTENT_TYPES[codec];
}

export const CODECS: readonly Codec[] = ["json", "avro", "avro-registry", "v2-json"];

export function isCodec(value: unknown): value is Codec {
  return (CODECS as readonly unknown[]).includes(value);
}

/**
 * Codec named by a record's `content-type` header: `{codec}` when recognised, `{codec: fallback}` when
 * the header is absent, `{unsupported}` (the raw value) when it names something Sluice cannot read.
 * Parameters such as `; charset=utf-8` are ignored; matching is case-insensitive. `application/json` on
 * a topic whose codec is v2-json means V2 JSON: both are JSON, and the topic's setting tells them apart.
 */
export function codecFromHeaders(
  headers: RecordHeaders | undefined,
  fallback: Codec,
): { codec: Codec } | { unsupported: string } {
  const raw = headerValue(headers, CONTENT_TYPE_HEADER);
  if (raw === undefined) return { codec: fallback };
  const semicolon = raw.indexOf(";");
  const mediaType = (semicolon < 0 ? raw : raw.slice(0, semicolon)).trim().toLowerCase();
  switch (mediaType) {
    case "":
      return { codec: fallback };
    case "application/json":
    case "text/json":
      return { codec: fallback === "v2-json" ? "v2-json" : "json" };
    case "application/avro":
    case "avro/binary":
    case "application/x-avro-binary":
      return { codec: "avro" };
    case "application/vnd.confluent.avro":
      return { codec: "avro-registry" };
    default:
      return { unsupported: mediaType };
  }
}

/** First value of a header as a string (header names are matched case-insensitively). */
export function headerValue(headers: RecordHeaders | undefined, name: string): string | undefined {
  if (headers === undefined) return undefined;
  let value = headers[name];
  if (value === undefined) {
    const lower = name.toLowerCase();
    // Per record, often for a header that is absent: only names of the same length are lower-cased.
    for (const key in headers) {
      if (key.length === lower.length && key.toLowerCase() === lower) {
        value = headers[key];
        break;
      }
    }
  }
  if (Array.isArray(value)) value = value[0];
  if (value === undefined) return undefined;
  return typeof value === "string" ? value : value.toString("utf8");
}
