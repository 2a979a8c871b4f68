import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { StringDecoder } from "node:string_decoder";
import { SluiceError } from "../sluice-error.js";
import { CsvReader } from "./csv-reader.js";
import { type FeatureColumns, featureTensor, isV2Request, v2RequestRow } from "./feature-rows.js";
import type { RowSource, SourceRow } from "./row-source.js";
import type { InputDescription } from "./run-provenance.js";

export type FileFormat = "jsonl" | "csv";

/** The format a file's name implies: `.csv` → csv, anything else → jsonl (`--input-format` overrides it). */
export function fileFormatOf(path: string): FileFormat {
  return /\.csv$/i.test(path) ? "csv" : "jsonl";
}

/** Resolved by the composition root (src/app/run-source.ts) from the flags and the config. */
export interface FileSourceOptions {
  path: string;
  format: FileFormat;
  /** Column / field holding the id (config `batch.idField`). */
  idField: string;
  /** Column / field holding the text (config `batch.textField`). */
  textField: string;
  /** Tensor models: feature columns read as one FP32 input instead of the text (`--features`). */
  features?: FeatureColumns;
}

/**
 * JSONL (one JSON object per line; blank lines skipped) or CSV with a header row (RFC 4180).
 * A row that cannot be read becomes an item with `error` (DECODE_FAILED / MISSING_ID) instead of
 * stopping the run; a CSV whose header lacks the id or text column stops before any work.
 */
export class FileSource implements RowSource {
  private readonly path: string;
  private readonly format: FileFormat;
  private readonly idField: string;
  private readonly textField: string;
  private readonly features: FeatureColumns | undefined;

  constructor(opts: FileSourceOptions) {
    this.features = opts.features;
    this.path = resolve(opts.path);
    this.format = opts.format;
    this.idField = opts.idField;
    this.textField = opts.textField;
  }

  async assertReadable(): Promise<void> {
    await this.size();
  }

  private async size(): Promise<number> {
    try {
      return (await stat(this.path)).size;
    } catch (cause) {
      throw new SluiceError("INPUT_INVALID", `cannot read input file ${this.path}: check the --input path`, {
        cause,
      });
    }
  }

  async describe(): Promise<InputDescription> {
    const size = await this.size();
    const hash = createHash("sha256");
    let rows = 0;
    for await (const item of this.read((chunk) => hash.update(chunk))) {
      void item;
      rows++;
    }
    return {
      kind: "file",
      uri: `file://${this.path}`,
      format: this.format,
      sha256: hash.digest("hex"),
      sizeBytes: size,
      rows,
    };
  }

  items(): AsyncIterable<SourceRow> {
    return this.read();
  }

  async close(): Promise<void> {}

  private async *read(onBytes?: (chunk: Buffer) => void): AsyncGenerator<SourceRow> {
    const stream = createReadStream(this.path, { highWaterMark: 1 << 20 });
    const utf8 = new StringDecoder("utf8");
    let started = false;
    // Spreadsheet exports often start with a UTF-8 byte order mark; it is not part of the first field.
    const decoder = {
      write(chunk: Buffer): string {
        const text = utf8.write(chunk);
        if (started || text.length === 0) return text;
        started = true;
        return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
      },
      end(): string {
        return utf8.end();
      },
    };
    let row = 0;
    if (this.format === "jsonl") {
      let rest = "";
      const lineItems = (text: string): SourceRow[] => {
        const out: SourceRow[] = [];
        const lines = (rest + text).split("\n");
        rest = lines.pop()!;
        for (const line of lines) {
          const item = this.fromJsonLine(line, row);
          if (item) {
            out.push(item);
            row++;
          }
        }
        return out;
      };
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        onBytes?.(chunk);
        yield* lineItems(decoder.write(chunk));
      }
      const last = this.fromJsonLine(rest + decoder.end(), row);
      if (last) yield last;
      return;
    }
    const reader = new CsvReader();
    let header: { id: number; text: number; names: string[] } | null = null;
    const csvItems = (records: string[][]): SourceRow[] => {
      const out: SourceRow[] = [];
      for (const record of records) {
        if (header === null) {
          header = this.readHeader(record);
          continue;
        }
        out.push(this.fromCsvRecord(record, header, row));
        row++;
      }
      return out;
    };
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      onBytes?.(chunk);
      yield* csvItems(reader.push(decoder.write(chunk)));
    }
    yield* csvItems([...reader.push(decoder.end()), ...reader.end()]);
  }

  private fromJsonLine(rawLine: string, row: number): SourceRow | null {
    const line = rawLine.endsWith("\r") ? rawLine.slice(0, -1) : rawLine;
    if (line.trim() === "") return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return failed(row, "DECODE_FAILED", `row ${row} is not valid JSON; expected one JSON object per line`);
    }
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      return failed(row, "DECODE_FAILED", `row ${row} is not a JSON object`);
    }
    const obj = parsed as Record<string, unknown>;
    const rawId = obj[this.idField];
    const id = typeof rawId === "string" ? rawId : typeof rawId === "number" ? String(rawId) : "";
    if (this.features === undefined && isV2Request(obj)) {
      const v2 = v2RequestRow(line, id, row);
      if (!v2.ok) return failed(row, v2.code, v2.message);
      return { row, id: v2.id as string, text: "", tensors: v2.tensors, attributes: null };
    }
    if (id === "") {
      return failed(row, "MISSING_ID", `row ${row} has no string or number "${this.idField}" (--id-field)`);
    }
    const item: SourceRow = { row, id, text: obj[this.textField], attributes: stringMap(obj["attributes"]) };
    return this.withFeatures(
      item,
      this.features?.columns.map((c) => obj[c]),
    );
  }

  /** With `--features`: the row's feature values as its tensors (a bad value fails the row). */
  private withFeatures(item: SourceRow, values: unknown[] | undefined): SourceRow {
    if (this.features === undefined || values === undefined) return item;
    const t = featureTensor(this.features, values, item.row);
    if (!t.ok) return { ...failed(item.row, t.code, t.message), id: item.id };
    return { ...item, text: "", tensors: t.tensors };
  }

  private readHeader(record: string[]): { id: number; text: number; names: string[] } {
    const id = record.indexOf(this.idField);
    const text = record.indexOf(this.textField);
    const needed = [
      this.idField,
      ...(this.features === undefined ? [this.textField] : this.features.columns),
    ];
    if (needed.some((c) => !record.includes(c))) {
      throw new SluiceError(
        "INPUT_INVALID",
        `CSV header of ${this.path} has columns [${record.join(", ")}]; it needs ${needed.map((c) => `"${c}"`).join(" and ")} (set --id-field / ${this.features === undefined ? "--text-field" : "--features"})`,
      );
    }
    return { id, text, names: record };
  }

  private fromCsvRecord(
    record: string[],
    header: { id: number; text: number; names: string[] },
    row: number,
  ): SourceRow {
    const id = record[header.id] ?? "";
    if (id === "") return failed(row, "MISSING_ID", `row ${row} has an empty "${this.idField}" column`);
    const item: SourceRow = { row, id, text: record[header.text] ?? "", attributes: null };
    return this.withFeatures(
      item,
      this.features?.columns.map((c) => record[header.names.indexOf(c)]),
    );
  }
}

function failed(row: number, code: string, message: string): SourceRow {
  return { row, id: `#row-${row}`, text: null, attributes: null, error: { code, message } };
}

function stringMap(value: unknown): Record<string, string> | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return null;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) if (typeof v === "string") out[k] = v;
  return out;
}
