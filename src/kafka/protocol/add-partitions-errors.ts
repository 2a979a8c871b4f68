import { kafkajsModule } from "./kafkajs-module.js";

/**
 * kafkajs 2.2.4 answers an AddPartitionsToTxn response with the error of its *first* failed
 * partition. When one topic of a transaction is refused (TOPIC_AUTHORIZATION_FAILED), the broker marks
 * every other partition OPERATION_NOT_ATTEMPTED, so which error comes first is down to response
 * order: half the time the refusal looked like a retriable "operation not attempted", and a partition
 * whose dead-letter topic was not writable was reset and retried in a loop. This patch makes the
 * parser throw the real error (anything but OPERATION_NOT_ATTEMPTED first) and attach the names of
 * the topics that carried it as `refusedTopics`, so `kafkaFailure` names the refused topic exactly.
 * Idempotent; applied by `createKafka` next to the read_committed fix.
 */
const WRAPPED = Symbol.for("sluice.kafkajs.addPartitionsErrors");
const OPERATION_NOT_ATTEMPTED = 55;

interface PartitionsResponse {
  errors?: { topic: string; partitionErrors: { partition: number; errorCode: number }[] }[];
}
type Parse = ((data: PartitionsResponse) => Promise<unknown>) & { [WRAPPED]?: true };

export function fixAddPartitionsErrors(): void {
  const { createErrorFromCode } = kafkajsModule<{ createErrorFromCode: (code: number) => Error }>(
    "protocol",
    "error.js",
  );
  for (const v of [0, 1]) {
    let mod: { parse?: Parse };
    try {
      mod = kafkajsModule("protocol", "requests", "addPartitionsToTxn", `v${v}`, "response.js");
    } catch {
      continue; // a kafkajs without this version: nothing to patch
    }
    const original = mod.parse;
    if (typeof original !== "function" || original[WRAPPED]) continue;
    const wrapped: Parse = async (data) => {
      const failed = (data.errors ?? []).flatMap((t) =>
        t.partitionErrors
          .filter((p) => p.errorCode !== 0)
          .map((p) => ({ topic: t.topic, code: p.errorCode })),
      );
      const real = failed.find((f) => f.code !== OPERATION_NOT_ATTEMPTED);
      if (!real) return original(data);
      const error = createErrorFromCode(real.code);
      const topics = [...new Set(failed.filter((f) => f.code === real.code).map((f) => f.topic))];
      throw Object.assign(error, { refusedTopics: topics });
    };
    wrapped[WRAPPED] = true;
    mod.parse = wrapped;
  }
}
