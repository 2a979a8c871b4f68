import type { Kafka } from "kafkajs";
import { decodeRunManifest, type RunManifest } from "../../backfill/run-manifest.js";
import type { RunManifestSource } from "../../observability/backfill-run-board.js";
import { withAdmin } from "../client/admin-session.js";
import { readKafkaRanges } from "../read/kafka-range-reader.js";

/**
 * Every run's last committed manifest from the compacted runs topic (`topics.runs`), for the live
 * page. Each call asks the broker for the topic's end offsets and reads only the records added since
 * the last call (the first reads from the start), so an idle runs topic costs one metadata request.
 */
export class RunManifestFeed implements RunManifestSource {
  private readonly runs = new Map<string, RunManifest>();
  /** Next offset to read, per partition. */
  private readonly next = new Map<number, string>();

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
  ) {}

  async manifests(): Promise<RunManifest[]> {
    const ranges = await withAdmin(this.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(this.topic)) return [];
      const offsets = await admin.fetchTopicOffsets(this.topic);
      return offsets.map((o) => ({
        partition: o.partition,
        startOffset: maxOffset(this.next.get(o.partition) ?? o.low, o.low),
        endOffset: o.high,
      }));
    });
    for await (const { partition, message } of readKafkaRanges({
      kafka: this.kafka,
      topic: this.topic,
      ranges,
    })) {
      const runId = message.key?.toString("utf8");
      if (runId === undefined) continue;
      if (message.value === null) this.runs.delete(runId);
      else {
        try {
          this.runs.set(
            runId,
            decodeRunManifest(message.value, `${this.topic}/${partition}@${message.offset}`),
          );
        } catch {
          // Not a manifest this Sluice reads (another format version): not listed.
        }
      }
    }
    for (const r of ranges) this.next.set(r.partition, r.endOffset);
    return [...this.runs.values()];
  }
}

function maxOffset(a: string, b: string): string {
  return BigInt(a) >= BigInt(b) ? a : b;
}
