import avro, { type Resolver, type Schema, type Type } from "avsc";
import { loadSchema } from "./avro-schemas.js";

/**
 * Writer schemas of registry-framed requests, by registry id, each resolved once against the
 * project's request schema (schemas/inference-request.avsc) as the reader schema, by Avro schema
 * resolution: extra writer fields are skipped, reader fields missing from the writer take their
 * defaults (`deadlineMs`, `attributes`), and `id`/`text` must be there. The writer's record name
 * does not matter (the reader gets it as an alias), so a producer's `com.acme.Ticket` with the
 * right fields decodes.
 *
 * Lookups are cached for the life of the process (a registry id names one immutable schema), so a
 * registry outage never stalls records whose schemas are known. An id the registry answered "not
 * found" for, or whose schema does not resolve, is remembered as a permanent failure (its records
 * become dead letters); a lookup the registry could not answer at all is not remembered, so it is
 * retried (see `load`).
 */
export type WriterSchemaLookup =
  | { found: Schema }
  | { notFound: string }
  /** The id exists but is no Avro schema (JSON Schema, Protobuf). */
  | { notAvro: string };

/** Asks the registry for the schema of an id; rejects when the registry cannot answer (retriable). */
export type FetchWriterSchema = (schemaId: number) => Promise<WriterSchemaLookup>;

export type WriterSchemaEntry =
  | { ok: true; reader: Type; resolver: Resolver }
  | { ok: false; code: "UNKNOWN_SCHEMA_ID" | "SCHEMA_UNRESOLVABLE"; message: string };

/** Failures remembered at most (garbage ids from a broken producer must not grow memory forever). */
const MAX_FAILED_ENTRIES = 10_000;

export class RequestWriterSchemas {
  private readonly entries = new Map<number, WriterSchemaEntry>();
  private failed = 0;

  constructor(private readonly fetchSchema: FetchWriterSchema) {}

  /** What is known about an id; undefined until `load` has looked it up. */
  entry(schemaId: number): WriterSchemaEntry | undefined {
    return this.entries.get(schemaId);
  }

  /** The ids among `schemaIds` not looked up yet (no duplicates). */
  missing(schemaIds: Iterable<number>): number[] {
    return [...new Set(schemaIds)].filter((id) => !this.entries.has(id));
  }

  /**
   * Looks the ids up (concurrently). Answers (found or not found) are cached; if the registry could
   * not answer for some id, the others are still cached and the first such error is thrown.
   */
  async load(schemaIds: Iterable<number>): Promise<void> {
    const ids = this.missing(schemaIds);
    const settled = await Promise.allSettled(ids.map((id) => this.fetchSchema(id)));
    let firstError: unknown;
    settled.forEach((s, i) => {
      const id = ids[i] as number;
      if (s.status === "rejected") firstError ??= s.reason;
      else this.remember(id, resolve(id, s.value));
    });
    if (firstError !== undefined) throw firstError;
  }

  private remember(id: number, entry: WriterSchemaEntry): void {
    if (!entry.ok) {
      if (this.failed >= MAX_FAILED_ENTRIES) {
        for (const [key, e] of this.entries) {
          if (e.ok) continue;
          this.entries.delete(key);
          this.failed--;
          break;
        }
      }
      this.failed++;
    }
    this.entries.set(id, entry);
  }
}

function resolve(id: number, lookup: WriterSchemaLookup): WriterSchemaEntry {
  if ("notAvro" in lookup) {
    return {
      ok: false,
      code: "SCHEMA_UNRESOLVABLE",
      message: `schema id ${id} is a ${lookup.notAvro} schema, not Avro; the avro-registry codec reads Avro records only`,
    };
  }
  if ("notFound" in lookup) {
    return {
      ok: false,
      code: "UNKNOWN_SCHEMA_ID",
      message: `schema id ${id} is not in the schema registry (${lookup.notFound}); the producer must register its schema in the registry Sluice reads (schemaRegistry.url)`,
    };
  }
  try {
    const writer = avro.Type.forSchema(lookup.found, { wrapUnions: "auto" });
    const readerSchema = loadSchema("inference-request") as { aliases?: string[] };
    const aliases = writer.name ? [writer.name] : [];
    const reader = avro.Type.forSchema({ ...readerSchema, aliases } as Schema, { wrapUnions: "auto" });
    return { ok: true, reader, resolver: reader.createResolver(writer) };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      code: "SCHEMA_UNRESOLVABLE",
      message: `writer schema ${id} does not resolve to the request contract (schemas/inference-request.avsc): ${reason.slice(0, 300)}; it needs string fields "id" and "text" (deadlineMs and attributes are optional)`,
    };
  }
}
