import { SluiceError } from "../sluice-error.js";

/**
 * Size refusals: the one rule of every Sluice writer for a broker refusing a send as too large
 * (PUBLISH_TOO_LARGE, src/kafka/write/produce-failure.ts). Two parts, used by all writers:
 * - `SendBound`, the learned send bound of a producer (`TransactionalProducer`, the at-least-once
 *   publisher): it starts at the configured bound (at most MAX_SEND_BYTES) and halves after a refused
 *   send of several records, for the rest of the producer's life, down to 1 estimated byte, i.e. one
 *   record per send. So a topic's smaller `max.message.bytes` is learned from the broker instead of
 *   configured twice.
 * - `retrySizeRefusals`, the one retry loop around one unit of writes: a refused send of several
 *   records → the unit again, whole (its writer has halved its bound); a record refused alone (a
 *   permanent fact about it) → the writer's `onRefused` hook gives the part holding it a replacement
 *   or leaves it out, once per part; a replacement refused again, or a refused record that is in no
 *   part, → the failure is thrown. The batch topic sink and backfill submit leave such rows out
 *   (`TransactionalProducer.runLeavingOutTooLarge`); the partition committer replaces the completion
 *   holding it by a payload-less dead letter, in the same transaction with the same offset.
 *
 * It lives in src/delivery, not src/kafka/write, because the transport-free partition committer runs the
 * loop too and src/kafka already builds on src/delivery (rooms form a one-way graph).
 */

/**
 * The most estimated bytes per send (one `sendBatch` call) of every writer: kafkajs puts all messages
 * of one partition in a call into a single record batch and does not split it, and the broker refuses a
 * batch above the topic's `max.message.bytes` (broker default `message.max.bytes`, 1 MiB) with
 * MESSAGE_TOO_LARGE. Half the broker default; `delivery.maxTransactionBytes` may lower it.
 */
export const MAX_SEND_BYTES = 512 * 1024;

/** What a PUBLISH_TOO_LARGE says about the refused send (its error context). */
export interface RefusedSend {
  /** Records in the refused send: 1 means that record is too large alone. */
  records: number;
  /** Index of the send's first record in the unit's records (in the order the writer sends them). */
  recordIndex: number;
}

/** A producer's send bound, learned from the broker's refusals (see the module comment). */
export class SendBound {
  private current: number;

  /** `configured`: `delivery.maxTransactionBytes`; the bound starts there, at most MAX_SEND_BYTES. */
  constructor(configured: number) {
    this.current = Math.max(1, Math.min(configured, MAX_SEND_BYTES));
  }

  /** The most estimated bytes per send now (a record bigger than that goes alone). */
  get bytes(): number {
    return this.current;
  }

  /** The broker refused a send of `records` records: several → the bound halves (never below 1). */
  refused(records: number): void {
    if (records > 1) this.current = Math.max(1, Math.floor(this.current / 2));
  }
}

/** The refused send a PUBLISH_TOO_LARGE names, or undefined for any other error. */
function refusedSend(error: unknown): RefusedSend | undefined {
  if (!(error instanceof SluiceError) || error.code !== "PUBLISH_TOO_LARGE") return undefined;
  const { records, recordIndex } = error.context;
  if (typeof records !== "number" || typeof recordIndex !== "number") return undefined;
  // records 0: a refusal outside any send (nothing was being sent), which no retry can fix.
  if (records < 1 || recordIndex < 0) return undefined;
  return { records, recordIndex };
}

/** One unit of writes under the loop: its leading records in parts, and how to write them. */
export interface RefusableUnit<P, T> {
  /**
   * What a refusal replaces or leaves out as a whole, in order (a row; a completion with its outputs).
   * The parts' records lead the unit's records; records after them (a closing manifest, changelog
   * entries, a checkpoint) are in no part.
   */
  parts: readonly P[];
  /** How many of the unit's leading records `part` is. */
  recordsOf: (part: P) => number;
  /** One attempt at the whole unit with these parts; throws a classified SluiceError. */
  write: (parts: readonly P[]) => Promise<T>;
  /**
   * A record of `part` (`index`: its place in `parts` as given) was refused alone: its replacement,
   * or undefined to leave it out; may throw (e.g. `failure`) instead. Asked at most once per part.
   */
  onRefused: (part: P, index: number, failure: SluiceError) => P | undefined;
}

/**
 * How many refused sends of several records one unit may see: the bound halves at each, from at
 * most MAX_SEND_BYTES down to 1, so a writer that keeps its promise never reaches it; a guard, not a
 * budget.
 */
const MAX_HALVINGS = Math.ceil(Math.log2(MAX_SEND_BYTES)) + 1;

/** Writes `unit` by the rule of the module comment; returns what its accepted attempt returned. */
export async function retrySizeRefusals<P, T>(unit: RefusableUnit<P, T>): Promise<T> {
  const parts = unit.parts.map((part, index) => ({ part, index, replaced: false }));
  let halvings = 0;
  for (;;) {
    try {
      return await unit.write(parts.map((p) => p.part));
    } catch (error) {
      const refused = refusedSend(error);
      if (!refused) throw error;
      if (refused.records > 1) {
        if (++halvings > MAX_HALVINGS) throw error;
        continue;
      }
      const at = partAt(
        parts.map((p) => unit.recordsOf(p.part)),
        refused.recordIndex,
      );
      const hit = at === undefined ? undefined : parts[at];
      if (at === undefined || !hit || hit.replaced) throw error;
      const replacement = unit.onRefused(hit.part, hit.index, error as SluiceError);
      if (replacement === undefined) parts.splice(at, 1);
      else parts[at] = { part: replacement, index: hit.index, replaced: true };
    }
  }
}

/** Which part holds the record at `recordIndex`, given each part's record count; undefined: none. */
function partAt(counts: readonly number[], recordIndex: number): number | undefined {
  let end = 0;
  for (const [i, count] of counts.entries()) {
    end += count;
    if (recordIndex < end) return i;
  }
  return undefined;
}
