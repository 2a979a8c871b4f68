import type { TensorInputs } from "../contracts/tensor.js";
import type { InputDescription } from "./run-provenance.js";

/**
 * One input row. `row` numbers are consecutive from 0 in a deterministic order (file order; for a topic,
 * partition by partition in offset order), so shards are the same on every run over the same input.
 */
export interface SourceRow {
  row: number;
  /** Request id; for rows without a usable id, a stable placeholder `#row-N` and `error` is set. */
  id: string;
  text: unknown;
  /** The row's tensors, for `model.task: tensor` (a V2 request line, or `--features` columns). */
  tensors?: TensorInputs;
  attributes: Record<string, string> | null;
  /** Where a topic row came from (absent for files). */
  source?: { topic: string; partition: number; offset: string; timestampMs: number };
  /** Set when the row could not be decoded; it goes straight to failures. */
  error?: { code: string; message: string };
}

export interface RowSource {
  /**
   * Fails with INPUT_INVALID when the input cannot be read at all (a missing file), before the
   * submission touches Kafka; a source whose every check needs the broker leaves it out.
   */
  assertReadable?(): Promise<void>;
  /**
   * Reads the input's identity (hash or offset ranges) without keeping rows. `previous` is the
   * manifest's description when resuming: a topic source reuses its fixed ranges if the spec matches.
   */
  describe(previous?: InputDescription): Promise<InputDescription>;
  /** Rows in order. Call once, after `describe()`. */
  items(): AsyncIterable<SourceRow>;
  close(): Promise<void>;
}
