import type { Logger } from "pino";
import type { SluiceEventMap, SluiceEvents } from "../events/sluice-events.js";
import { RequestIdHash } from "./request-id-hash.js";

export interface DeadLetterLogOptions {
  /** Usually `logger.child({ component: "dead-letters" })`. */
  logger: Logger;
  /** How ids are hashed (the batch log's defaults: 16 hex characters of SHA-256). */
  idHash?: RequestIdHash;
}

/**
 * One `warn` line per dead letter, written when the transaction that published it commits (from
 * `record.outcome`): error code, failing stage, source topic, partition and offset, and the hashed
 * request id (or hashed Kafka key when the record never decoded). Never the value, the key or any
 * text: the dead-letter topic keeps the record itself.
 */
export class DeadLetterLog {
  private readonly logger: Logger;
  private readonly ids: RequestIdHash;

  constructor(opts: DeadLetterLogOptions) {
    this.logger = opts.logger;
    this.ids = opts.idHash ?? new RequestIdHash();
  }

  attach(events: SluiceEvents): () => void {
    return events.on("record.outcome", (e) => {
      if (e.outcome === "dead_letter") this.write(e);
    });
  }

  write(e: SluiceEventMap["record.outcome"]): void {
    if (!this.logger.isLevelEnabled("warn")) return;
    const note = e.deadLetter;
    this.logger.warn(
      {
        code: e.errorCode ?? "UNKNOWN",
        ...(note ? { stage: note.stage } : {}),
        topic: e.topic,
        partition: e.partition,
        ...(note ? { offset: note.offset } : {}),
        ...(note?.requestId !== undefined
          ? { idHash: this.ids.of(note.requestId) }
          : note?.key !== undefined
            ? { keyHash: this.ids.of(note.key) }
            : {}),
      },
      "dead letter",
    );
  }
}
