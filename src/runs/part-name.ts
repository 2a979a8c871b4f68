/**
 * The names of a run's parts, shared by batch mode (shards and retry units) and backfill export, so a
 * `part-NNNNN` always means the same thing: the part's index, 0-based, five digits (docs/batch-mode.md).
 * The name is also the stem of the part's files (`<name>.jsonl`, `failures/<name>.jsonl`).
 */

/** Part _index_ of a run: `part-00003`. */
export function partName(index: number): string {
  return `part-${pad(index, 5)}`;
}

/** Part _index_ of retry round _round_: `retry-01-part-00000`. */
export function retryPartName(round: number, index: number): string {
  return `retry-${pad(round, 2)}-${partName(index)}`;
}

/** The file holding a part's rows in `format` (the format is the extension): `part-00003.jsonl`. */
export function partFileName(name: string, format: string): string {
  return `${name}.${format}`;
}

function pad(n: number, digits: number): string {
  return String(n).padStart(digits, "0");
}
