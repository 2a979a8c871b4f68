import { SluiceError } from "../sluice-error.js";

/**
 * Incremental RFC 4180 reader: comma-separated fields, CRLF or LF record ends, double-quoted fields
 * that may hold commas, quotes (doubled: "") and line breaks. A maintained parser (`csv-parse`) would be
 * the better long-term choice; it is not installed, so this covers the RFC and nothing more
 * (no custom delimiters, no comments, no trimming).
 *
 * Feed text with `push(chunk)`; complete records come back as soon as they end. `end()` flushes the
 * last record when the input does not end with a line break. `line` in errors is 1-based.
 */
export class CsvReader {
  private field = "";
  private record: string[] = [];
  private inQuotes = false;
  /** The previous chunk ended on a quote inside a quoted field: escape or closing quote, unknown yet. */
  private pendingQuote = false;
  /** The last field was closed by a quote; only a delimiter or a record end may follow. */
  private afterQuote = false;
  private sawAnything = false;
  private pendingCr = false;
  private lineNo = 1;

  push(chunk: string): string[][] {
    const out: string[][] = [];
    let i = 0;
    const n = chunk.length;
    if (this.pendingCr) {
      this.pendingCr = false;
      if (n > 0 && chunk[0] === "\n") i = 1;
    }
    while (i < n) {
      const c = chunk[i]!;
      if (this.pendingQuote) {
        this.pendingQuote = false;
        if (c === '"') {
          this.field += '"';
          i++;
          continue;
        }
        this.inQuotes = false;
        this.afterQuote = true;
        // fall through and treat `c` outside quotes
      }
      if (this.inQuotes) {
        if (c === '"') {
          if (i + 1 < n) {
            if (chunk[i + 1] === '"') {
              this.field += '"';
              i += 2;
              continue;
            }
            this.inQuotes = false;
            this.afterQuote = true;
            i++;
            continue;
          }
          this.pendingQuote = true;
          i++;
          continue;
        }
        // Copy a run of plain characters at once: keeps long quoted fields linear.
        let j = chunk.indexOf('"', i);
        if (j === -1) j = n;
        const run = chunk.slice(i, j);
        for (let k = 0; k < run.length; k++) if (run.charCodeAt(k) === 10) this.lineNo++;
        this.field += run;
        i = j;
        continue;
      }
      if (c === ",") {
        this.record.push(this.field);
        this.field = "";
        this.afterQuote = false;
        this.sawAnything = true;
        i++;
      } else if (c === "\r" || c === "\n") {
        this.finishRecord(out);
        this.lineNo++;
        if (c === "\r") {
          if (i + 1 < n) {
            if (chunk[i + 1] === "\n") i++;
          } else this.pendingCr = true;
        }
        i++;
      } else if (c === '"') {
        if (this.field.length > 0 || this.afterQuote) {
          throw new SluiceError(
            "INPUT_INVALID",
            `CSV line ${this.lineNo}: a quote inside an unquoted field; quote the whole field and double inner quotes ("")`,
          );
        }
        this.inQuotes = true;
        this.sawAnything = true;
        i++;
      } else {
        if (this.afterQuote) {
          throw new SluiceError(
            "INPUT_INVALID",
            `CSV line ${this.lineNo}: text after a closing quote; a quoted field must end at a comma or line end`,
          );
        }
        this.field += c;
        this.sawAnything = true;
        i++;
      }
    }
    return out;
  }

  end(): string[][] {
    const out: string[][] = [];
    if (this.pendingQuote) {
      this.pendingQuote = false;
      this.inQuotes = false;
      this.afterQuote = true;
    }
    if (this.inQuotes) {
      throw new SluiceError(
        "INPUT_INVALID",
        `CSV line ${this.lineNo}: the input ends inside a quoted field; a closing quote is missing`,
      );
    }
    this.finishRecord(out);
    return out;
  }

  /** 1-based line number of the reader's position (for error messages). */
  get line(): number {
    return this.lineNo;
  }

  private finishRecord(out: string[][]): void {
    if (!this.sawAnything && this.field === "" && this.record.length === 0) return; // blank line
    this.record.push(this.field);
    out.push(this.record);
    this.record = [];
    this.field = "";
    this.afterQuote = false;
    this.sawAnything = false;
  }
}

/** Parses a whole CSV string (tests, small inputs). */
export function parseCsv(text: string): string[][] {
  const reader = new CsvReader();
  return [...reader.push(text), ...reader.end()];
}
