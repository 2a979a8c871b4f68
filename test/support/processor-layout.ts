import type { StreamProcessorOptions } from "../../src/processor/stream-processor-options.js";

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
