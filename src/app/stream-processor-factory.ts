import { ResultEncoder } from "../contracts/result-codec.js";
import { CompletionBuilder } from "../delivery/completion-builder.js";
import { DedupChangelog } from "../delivery/dedup-changelog.js";
import { PartitionCommitter } from "../delivery/partition-committer.js";
import { MAX_SEND_BYTES } from "../delivery/size-refusal.js";
import { fallbackPolicyFor } from "../fallback/fallback-policy.js";
import { FallbackRules } from "../fallback/fallback-rules.js";
import { mayBeMissingTopic } from "../kafka/client/kafka-failure.js";
import { assertOutputTopics, changelogTopicFor, type OutputTopic } from "../kafka/client/topic-admin.js";
import { ConsumerLoop } from "../kafka/read/consumer-loop.js";
import { KafkaRestoreSources } from "../kafka/read/restore-sources.js";
import { createResultPublisher } from "../kafka/write/result-publisher.js";
import { PartitionRestorer } from "../processor/partition-restorer.js";
import type { CommitterFactory } from "../processor/processor-ports.js";
import { SHADOW_QUEUE_ITEMS, ShadowScorer } from "../processor/shadow-scorer.js";
import { StreamProcessor } from "../processor/stream-processor.js";
import {
  resolveProcessorOptions,
  type StreamProcessorOptions,
} from "../processor/stream-processor-options.js";
import { isAccessFailure, isSluiceError, type SluiceError } from "../sluice-error.js";
import { systemClock } from "../time/clock.js";

/**
 * Wires a StreamProcessor to Kafka: options validated once (through the config schema), then the
 * consumer loop, the restore sources, the per-partition committers and the completion builder.
 * Composition only; every rule lives in the parts.
 */
export interface StreamProcessorWiring {
  /**
   * A committer or a restore failed with a security failure (isAccessFailure). Such a partition is
   * not reset and reclaimed (it would only be refused again, in a loop): it stops, and this is told
   * so the runtime can report it and exit. Without it those failures are handled like any other.
   */
  onAccessFailure?: (error: SluiceError) => void;
}

export function createStreamProcessor(
  options: StreamProcessorOptions,
  wiring: StreamProcessorWiring = {},
): StreamProcessor {
  const o = resolveProcessorOptions(options);
  const source = new ConsumerLoop({
    kafka: o.kafka,
    groupId: o.groupId,
    // One group consumes both lanes (docs/lanes.md).
    topics: [...o.requestTopics, ...o.backfillTopics],
    sessionTimeoutMs: o.sessionTimeoutMs,
    heartbeatIntervalMs: o.heartbeatIntervalMs,
    maxBytesPerPartition: o.maxBytesPerPartition,
  });
  const restorer = new PartitionRestorer({
    sources: new KafkaRestoreSources({
      kafka: o.kafka,
      groupId: o.groupId,
      restoreTimeoutMs: o.restoreTimeoutMs,
    }),
    dedupTtlMs: o.dedupTtlMs,
    retryMs: o.restoreRetryMs,
    log: o.log,
    ...(wiring.onAccessFailure ? { onAccessFailure: wiring.onAccessFailure } : {}),
  });
  const outputs: OutputTopic[] = [
    { topic: o.resultsTopic, setting: "topics.results" },
    ...(o.backfillResultsTopic ? [{ topic: o.backfillResultsTopic, setting: "topics.backfillResults" }] : []),
    { topic: o.deadLetterTopic, setting: "topics.deadLetters" },
    ...(o.shadow && o.shadow.share > 0 ? [{ topic: o.shadow.topic, setting: "topics.shadowResults" }] : []),
    ...(o.backfillTopics.length > 0 ? [{ topic: o.runsTopic, setting: "topics.runs" }] : []),
    ...[...o.requestTopics, ...o.backfillTopics].map((t) => ({
      topic: changelogTopicFor(o.dedupChangelogBase, o.groupId, t),
      setting: "topics.dedupChangelog",
    })),
  ];
  const committers: CommitterFactory = async (tp, changelogTopic, hooks) => {
    // With transactions, creating the publisher fences the partition's previous owner.
    const publisher = await createResultPublisher(
      { kafka: o.kafka, groupId: o.groupId, topic: tp.topic, partition: tp.partition },
      {
        transactions: o.transactions,
        transactionTimeoutMs: o.transactionTimeoutMs,
        maxTransactionBytes: o.maxTransactionBytes,
        // At-least-once: the offset is committed by our group member after the outputs are acked.
        commitOffset: (nextOffset) => source.commitOffset(tp, nextOffset),
      },
    );
    return new PartitionCommitter(
      {
        topic: tp.topic,
        partition: tp.partition,
        events: o.events,
        // Backfill results need no online visibility: fewer, larger transactions (docs/lanes.md).
        commitIntervalMs: o.backfillTopics.includes(tp.topic)
          ? o.backfillCommitIntervalMs
          : o.commitIntervalMs,
        maxTransactionRecords: o.maxTransactionRecords,
        maxTransactionBytes: o.maxTransactionBytes,
        deadLetterTopic: o.deadLetterTopic,
        // Only backfill-lane rows carry a run's cost, so only backfill partitions write shares.
        ...(o.backfillTopics.includes(tp.topic) ? { runCostTopic: o.runsTopic } : {}),
        onCommitted: hooks.onCommitted,
        ...(hooks.commitShare ? { commitShare: hooks.commitShare } : {}),
        offsetCheckpoint: { topic: changelogTopic, partition: tp.partition },
        ...(hooks.dedup
          ? {
              dedupChangelog: new DedupChangelog({
                topic: changelogTopic,
                partition: tp.partition,
                dedup: hooks.dedup,
                now: () => systemClock.now(),
              }),
            }
          : {}),
        tracer: o.tracer,
        onFailure: (error) => {
          if (isAccessFailure(error) && wiring.onAccessFailure) wiring.onAccessFailure(error);
          // A missing output topic looks transient to kafkajs; a reset would retry it forever.
          else if (mayBeMissingTopic(error))
            void assertOutputTopics(o.kafka, outputs).then(
              () => hooks.onFailure(error),
              (missing: unknown) => hooks.onFailure(isSluiceError(missing) ? missing : error),
            );
          else hooks.onFailure(error);
        },
      },
      publisher,
      systemClock,
    );
  };
  const encoder = o.codecs?.resultEncoder ?? new ResultEncoder({ codec: o.resultCodec });
  const backfillEncoder = o.codecs?.backfillResultEncoder;
  const completions = new CompletionBuilder({
    resultsTopic: o.resultsTopic,
    backfillResultsTopic: o.backfillResultsTopic ?? o.resultsTopic,
    deadLetterTopic: o.deadLetterTopic,
    encodeResult: (result) => encoder.encode(result),
    ...(backfillEncoder ? { encodeBackfillResult: (result) => backfillEncoder.encode(result) } : {}),
    // Fits one transaction and one send (and so the broker's default message size limit).
    maxDeadLetterBytes: Math.min(o.maxTransactionBytes, MAX_SEND_BYTES) - 64,
  });
  return new StreamProcessor(o, {
    source,
    restorer,
    committers,
    model: o.model,
    ...(o.router ? { router: o.router } : {}),
    ...(o.shadow && o.shadow.share > 0
      ? {
          shadow: new ShadowScorer({
            ...o.shadow,
            encode: (result) => encoder.encode(result),
            maxQueued: SHADOW_QUEUE_ITEMS,
            maxBatch: o.maxBatchSize,
            clock: systemClock,
            emit: (name, payload) => o.events.emit(name, payload),
          }),
        }
      : {}),
    completions,
    events: o.events,
    log: o.log,
    clock: systemClock,
    tracer: o.tracer,
    changelogTopicOf: (topic) => changelogTopicFor(o.dedupChangelogBase, o.groupId, topic),
    // At start, every output but the runs topic: the first `sluice backfill submit` creates that one,
    // and backfill rows (the only ones that write it) come with a submit.
    outputsReady: () =>
      assertOutputTopics(
        o.kafka,
        outputs.filter((t) => t.setting !== "topics.runs"),
      ),
    ...(o.codecs ? { decoder: o.codecs.requestDecoder } : {}),
    // Loaded and validated once, here; a bad file stops start-up with CONFIG_INVALID.
    fallback: fallbackPolicyFor(
      { rulesPath: o.fallbackRulesPath, maxOnlineQueue: o.fallbackMaxOnlineQueue, modelTask: o.model.task },
      (path) => FallbackRules.load(path),
    ),
  });
}
