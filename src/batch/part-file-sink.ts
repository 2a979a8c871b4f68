import { createHash } from "node:crypto";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import avro from "avsc";
import { AtomicFileWriter, TEMP_SUFFIX } from "../runs/atomic-file.js";
import { partFileName } from "../runs/part-name.js";
import type { BatchResultRow, BatchSink } from "./batch-sink.js";

export type PartFormat = "jsonl" | "avro";

export interface PartFileSinkOptions {
  dir: string;
  /** jsonl or avro (the composition root checks the `--format` flag). */
  format: PartFormat;
  /**
   * Seed for Avro sync markers. Avro container files normally carry a random 16-byte marker; deriving it
   * from this seed and the part name keeps parts byte-identical across runs. Default "sluice".
   */
  determinismSeed?: string;
}

/** Avro schema of a part-file row (flat: one nullable field per output kind). */
export const BATCH_RESULT_AVRO_SCHEMA = {
  type: "record",
  name: "BatchResult",
  namespace: "sluice.batch",
  fields: [
    { name: "id", type: "string" },
    { name: "row", type: "long" },
    { name: "status", type: "string" },
    { name: "embedding", type: ["null", { type: "array", items: "float" }], default: null },
    { name: "label", type: ["null", "string"], default: null },
    { name: "scores", type: ["null", { type: "map", values: "double" }], default: null },
    { name: "modelName", type: "string" },
    { name: "modelVersion", type: "string" },
    { name: "truncated", type: "boolean", default: false },
    { name: "attributes", type: ["null", { type: "map", values: "string" }], default: null },
    {
      name: "source",
      type: [
        "null",
        {
          type: "record",
          name: "RowSource",
          fields: [
            { name: "topic", type: "string" },
            { name: "partition", type: "int" },
            { name: "offset", type: "string" },
          ],
        },
      ],
      default: null,
    },
  ],
} as const;

const avroType = avro.Type.forSchema(BATCH_RESULT_AVRO_SCHEMA as unknown as avro.Schema, {
  wrapUnions: "auto",
});

export function toAvroRow(r: BatchResultRow): Record<string, unknown> {
  return {
    id: r.id,
    row: r.row,
    status: r.status,
    embedding: r.output.embedding ?? null,
    label: r.output.label ?? null,
    scores: r.output.scores ?? null,
    modelName: r.model.name,
    modelVersion: r.model.version,
    truncated: r.truncated,
    attributes: r.attributes,
    source: r.source,
  };
}

/** Writes each shard to `DIR/<key>.jsonl` or `DIR/<key>.avro` through a temporary file and a rename. */
export class PartFileSink implements BatchSink {
  readonly uri: string;
  readonly format: PartFormat;
  private readonly dir: string;
  private readonly seed: string;

  constructor(opts: PartFileSinkOptions) {
    this.dir = resolve(opts.dir);
    this.format = opts.format;
    this.seed = opts.determinismSeed ?? "sluice";
    this.uri = `file://${this.dir}`;
  }

  async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    for (const name of await readdir(this.dir)) {
      if (name.endsWith(TEMP_SUFFIX)) await rm(join(this.dir, name), { force: true });
    }
  }

  async writeShard(
    key: string,
    rows: readonly BatchResultRow[],
  ): Promise<{ output: string; sha256: string }> {
    const name = partFileName(key, this.format);
    const writer = new AtomicFileWriter(join(this.dir, name));
    try {
      if (this.format === "jsonl") {
        let buffered = "";
        for (const r of rows) {
          buffered += `${JSON.stringify(r)}\n`;
          if (buffered.length > 1 << 20) {
            await writer.write(buffered);
            buffered = "";
          }
        }
        if (buffered) await writer.write(buffered);
      } else {
        await this.writeAvro(writer, key, rows);
      }
      const { sha256 } = await writer.commit();
      return { output: name, sha256 };
    } catch (err) {
      await writer.abort();
      throw err;
    }
  }

  async removeOutput(output: string): Promise<void> {
    await rm(join(this.dir, output), { force: true });
  }

  async close(): Promise<void> {}

  private async writeAvro(
    writer: AtomicFileWriter,
    key: string,
    rows: readonly BatchResultRow[],
  ): Promise<void> {
    const syncMarker = createHash("sha256").update(`${this.seed}\0${key}`).digest().subarray(0, 16);
    const encoder = new avro.streams.BlockEncoder(avroType as unknown as avro.Schema, {
      codec: "null",
      syncMarker,
    });
    const chunks: Buffer[] = [];
    const done = new Promise<void>((resolvePromise, reject) => {
      encoder.on("data", (chunk: Buffer) => chunks.push(chunk));
      encoder.on("end", () => resolvePromise());
      encoder.on("error", reject);
    });
    for (const r of rows) encoder.write(toAvroRow(r));
    encoder.end();
    await done;
    for (const chunk of chunks) await writer.write(chunk);
  }
}
