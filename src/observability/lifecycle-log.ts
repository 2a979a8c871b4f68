import type { Logger } from "pino";
import type { SluiceEvents } from "../events/sluice-events.js";

/**
 * What an instance does, from the event bus: the Sluice-level summary lines of the logging policy
 * (docs/observability.md). `info`: the model loaded and each ownership change (partitions assigned or
 * revoked: the one line a rebalance gives, while kafkajs's own rebalance chatter stays at debug).
 * `debug`: every transaction, consumer pause/resume (backpressure) and lag sample. Nothing is
 * computed when the level is off.
 */
export class LifecycleLog {
  constructor(private readonly logger: Logger) {}

  attach(events: SluiceEvents): () => void {
    const log = this.logger;
    const offs = [
      events.on("model.loaded", (e) => log.info({ model: e }, "model loaded")),
      events.on("partitions.assigned", (e) => log.info(e, "partitions assigned")),
      events.on("partitions.revoked", (e) => log.info(e, "partitions revoked")),
      events.on("transaction.finished", (e) => {
        if (log.isLevelEnabled("debug")) log.debug({ transaction: e }, `transaction ${e.outcome}`);
      }),
      events.on("consumer.paused", (e) => log.debug(e, "consumer paused")),
      events.on("consumer.resumed", () => log.debug({}, "consumer resumed")),
      events.on("lag.sampled", (s) => {
        if (!log.isLevelEnabled("debug")) return;
        log.debug(
          {
            groupId: s.groupId,
            topics: s.topics.map((t) => ({ topic: t.topic, lagRecords: t.lagRecords })),
          },
          "lag sampled",
        );
      }),
    ];
    return () => {
      for (const off of offs) off();
    };
  }
}
