import type { Kafka } from "kafkajs";
import { decodeRunManifest, type RunManifest } from "../../backfill/run-manifest.js";
import {
  decodeRunCostShare,
  RUN_COST_KEY_PREFIX,
  type RunCostShare,
} from "../../contracts/run-cost-share.js";
import { withAdmin } from "../client/admin-session.js";
import { ensureCompactedTopic } from "../client/topic-admin.js";
import { readKafkaRanges } from "../read/kafka-range-reader.js";

/** Transactional id of a run's submitter: this prefix + the run id (a resubmit fences the last one). */
export const BACKFILL_TRANSACTIONAL_ID_PREFIX = "sluice-backfill-submit-";

export interface RunManifestStoreOptions {
  kafka: Kafka;
  /** `topics.runs`: compacted, keyed by run id. */
  topic: string;
  /** Replication factor when the topic is created. */
  replicationFactor: number;
}

/**
 * Reads backfill run manifests, and the cost shares serve instances write beside them
 * (src/contracts/run-cost-share.ts), from the compacted runs topic (`topics.runs`, one partition,
 * created on first submit or by serve with a backfill lane). The latest committed record of a run id is its manifest; `read_committed` hides
 * the manifests of aborted submit transactions. Writing happens only inside a submit transaction
 * (src/kafka/runs/backfill-run-writer.ts).
 */
export class RunManifestStore {
  constructor(private readonly opts: RunManifestStoreOptions) {}

  get topic(): string {
    return this.opts.topic;
  }

  /** Creates the runs topic (1 partition, cleanup.policy=compact) if it does not exist. */
  async ensureTopic(): Promise<void> {
    await ensureCompactedTopic(
      this.opts.kafka,
      this.opts.topic,
      this.opts.replicationFactor,
      `the runs topic ${this.opts.topic} (topics.runs)`,
    );
  }

  /** The run's last committed manifest, or null when the run (or the runs topic) does not exist. */
  async latest(runId: string): Promise<RunManifest | null> {
    return (await this.read(runId)).manifest;
  }

  /**
   * The run's last committed manifest and the committed cost shares serve instances wrote for its
   * rows (src/contracts/run-cost-share.ts), in one read of the runs topic.
   */
  async read(runId: string): Promise<{ manifest: RunManifest | null; costShares: RunCostShare[] }> {
    const ranges = await withAdmin(this.opts.kafka, async (admin) => {
      if (!(await admin.listTopics()).includes(this.opts.topic)) return null;
      const offsets = await admin.fetchTopicOffsets(this.opts.topic);
      return offsets.map((o) => ({ partition: o.partition, startOffset: o.low, endOffset: o.high }));
    });
    const costShares: RunCostShare[] = [];
    if (ranges === null) return { manifest: null, costShares };
    const sharePrefix = `${RUN_COST_KEY_PREFIX}${runId}/`;
    let last: RunManifest | null = null;
    for await (const { partition, message } of readKafkaRanges({
      kafka: this.opts.kafka,
      topic: this.opts.topic,
      ranges,
    })) {
      const key = message.key?.toString("utf8");
      if (key?.startsWith(sharePrefix)) {
        const share = decodeRunCostShare(message.value);
        if (share) costShares.push(share);
        continue;
      }
      if (key !== runId) continue;
      if (message.value === null) {
        last = null; // a tombstone: the run was deleted
        continue;
      }
      last = decodeRunManifest(message.value, `${this.opts.topic}/${partition}@${message.offset}`);
    }
    return { manifest: last, costShares };
  }
}
