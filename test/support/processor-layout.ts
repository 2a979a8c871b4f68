import type { SluiceEvents } from "../../src/events/sluice-events.js";
import type { ModelPort } from "../../src/model/model-port.js";
import type { StreamProcessorOptions } from "../../src/processor/stream-processor-options.js";
import { testKafka } from "./kafka-harness.js";

/**
 * The private set of topics one processor test runs on, named after `base` the same way `serveEnv`
 * names them for `sluice serve` (`<base>.requests`, `<base>.results`, …, group `<base>-group`).
 */
export interface ProcessorLayout {
  requests: string[];
  results: string;
  deadLetters: string;
  dedupChangelog: string;
  groupId: string;
  partitions: number;
  replicationFactor: number;
}

export function processorLayout(
  base: string,
  opts: { partitions?: number; groupId?: string; requests?: string[] } = {},
): ProcessorLayout {
  return {
    requests: opts.requests ?? [`${base}.requests`],
    results: `${base}.results`,
    deadLetters: `${base}.dlq`,
    dedupChangelog: `${base}.dedup`,
    groupId: opts.groupId ?? `${base}-group`,
    partitions: opts.partitions ?? 1,
    replicationFactor: 1,
  };
}

/** The topic and group fields of `StreamProcessorOptions` for `layout`. */
export function layoutOptions(
  layout: ProcessorLayout,
): Pick<
  StreamProcessorOptions,
  "groupId" | "requestTopics" | "resultsTopic" | "deadLetterTopic" | "dedupChangelogBase"
> {
  return {
    groupId: layout.groupId,
    requestTopics: layout.requests,
    resultsTopic: layout.results,
    deadLetterTopic: layout.deadLetters,
    dedupChangelogBase: layout.dedupChangelog,
  };
}

/**
 * Options of a processor on `layout` for tests of Kafka mechanics: the test broker, short commit
 * interval and session, then `extra`.
 */
export function layoutProcessorOptions(
  layout: ProcessorLayout,
  events: SluiceEvents,
  model: ModelPort,
  extra: Partial<StreamProcessorOptions> = {},
): StreamProcessorOptions {
  return {
    kafka: testKafka(),
    model,
    events,
    ...layoutOptions(layout),
    commitIntervalMs: 50,
    sessionTimeoutMs: 6000,
    heartbeatIntervalMs: 1000,
    ...extra,
  };
}
