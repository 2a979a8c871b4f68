import type { RefusedSend } from "../../delivery/size-refusal.js";
import { SluiceError } from "../../sluice-error.js";
import { errorChain } from "../client/kafka-failure.js";

/**
 * What a writer's produce or transaction failure means, for every Sluice writer (one home, so the
 * result publishers, the batch topic sink and the backfill run writer cannot drift apart):
 * - PUBLISH_TOO_LARGE: the broker refused a record or record batch as too large. Retrying the same
 *   request cannot succeed; a smaller one can. `context.records` is how many records the refused send
 *   held (1: that record is too large alone, a permanent fact about it) and `context.recordIndex` the
 *   index of its first record in the unit; what a writer does with it is the one rule of
 *   src/delivery/size-refusal.ts.
 * - PRODUCER_FENCED: a newer producer with the same transactional id took over (a newer owner of the
 *   partition, a second run of the same shard or submission). Never retried by the fenced side.
 * - TRANSACTION_FAILED: anything else (timeouts, leader moves, a broker restart); retriable.
 * Security and connectivity failures are classified before these by `kafkaFailure`.
 */

/** Who a failure is about and what its reader should do, for the message text. */
export interface FailureSubject {
  /** What the writes are for, e.g. `sales[3]` or `shard part-00000 of run r1 to scores`. */
  name: string;
  /** Error context (topic, partition, ...). */
  context: Record<string, unknown>;
  /** Sentence for a retriable TRANSACTION_FAILED, e.g. "rerun the same command to retry it". */
  retry: string;
  /** Sentence for PRODUCER_FENCED: what happens to the fenced side's work. */
  fenced: string;
}

/** True when the broker refused a record or record batch as too large (not worth retrying as is). */
export function isTooLarge(error: unknown): boolean {
  return errorChain(error).some((e) => {
    const type = (e as { type?: unknown }).type;
    return type === "MESSAGE_TOO_LARGE" || type === "RECORD_LIST_TOO_LARGE";
  });
}

function isFenced(error: unknown): boolean {
  return errorChain(error).some((e) => {
    const type = (e as { type?: unknown }).type;
    return (
      type === "INVALID_PRODUCER_EPOCH" ||
      type === "PRODUCER_FENCED" ||
      (e instanceof Error && /fenced|producer epoch/i.test(e.message))
    );
  });
}

/** A PUBLISH_TOO_LARGE for a refused send (see the module comment). */
export function tooLarge(error: unknown, subject: FailureSubject, send: RefusedSend): SluiceError {
  const message = error instanceof Error ? error.message : String(error);
  const what = send.records === 1 ? "a record" : `a send of ${send.records} records`;
  return new SluiceError(
    "PUBLISH_TOO_LARGE",
    `the broker refused ${what} of ${subject.name} as too large (${message})`,
    { retriable: send.records > 1, cause: error, context: { ...subject.context, ...send } },
  );
}

/** Maps a kafkajs produce/transaction error to PUBLISH_TOO_LARGE, PRODUCER_FENCED or TRANSACTION_FAILED. */
export function classifyProduceFailure(
  error: unknown,
  subject: FailureSubject,
  doing: string,
  send: RefusedSend = { records: 0, recordIndex: 0 },
): SluiceError {
  if (error instanceof SluiceError) return error;
  if (isTooLarge(error)) return tooLarge(error, subject, send);
  const message = error instanceof Error ? error.message : String(error);
  if (isFenced(error)) {
    return new SluiceError(
      "PRODUCER_FENCED",
      `${subject.name} is owned by another producer now (fenced while ${doing}); ${subject.fenced}`,
      { cause: error, context: subject.context },
    );
  }
  return new SluiceError(
    "TRANSACTION_FAILED",
    `${subject.name}: ${doing} failed (${message}); ${subject.retry}`,
    {
      retriable: true,
      cause: error,
      context: subject.context,
    },
  );
}

/** The subject of an input partition's result writes (the stream path). */
export function partitionSubject(topic: string, partition: number): FailureSubject {
  return {
    name: `${topic}[${partition}]`,
    context: { topic, partition },
    retry: "the partition is reprocessed from its committed offset",
    fenced:
      "another instance owns the partition: its in-flight work is dropped here and the partition is reclaimed from its committed offset if still assigned",
  };
}

/** `classifyProduceFailure` for an input partition's result writes (the stream path's wording). */
export function classify(error: unknown, topic: string, partition: number, doing: string): SluiceError {
  return classifyProduceFailure(error, partitionSubject(topic, partition), doing);
}
