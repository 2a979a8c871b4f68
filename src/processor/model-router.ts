import type { Lane } from "../contracts/lane.js";
import type { ModelBoundary } from "../contracts/model-control.js";
import type { TopicPartition } from "../contracts/topic-partition.js";
import type { AttachedUnit } from "../delivery/partition-committer.js";
import type { ModelPort } from "../model/model-port.js";

/** What a router needs to know of a work item (src/processor/request-intake.ts `WorkItem` fits). */
export interface RoutedItem {
  lane: Lane;
  task: { tp: TopicPartition };
  source: { offset: string };
  runId: string | undefined;
  modelVersion?: string | undefined;
}

/** What the switch needs of an owned online partition (a running `PartitionTask` fits). */
export interface SwitchTask {
  readonly tp: TopicPartition;
  readonly key: string;
  readonly changelogTopic: string;
  /** Offsets below this were taken already (queued, inferring or committed). */
  readonly takenOffset: string;
  readonly committer?: { attach?(unit: AttachedUnit): void } | undefined;
}

/** The processor's side of the switch (bound once by `StreamProcessor`). */
export interface SwitchPartitions {
  /** Running tasks of the online lane. */
  running(): SwitchTask[];
  pause(tp: TopicPartition): void;
  /** Resumes unless backpressure or a stop holds the partition. */
  resume(tp: TopicPartition): void;
}

/** The model that answers an item, or why none may (a dead letter with that code). */
export type ModelChoice =
  | { ok: true; model: ModelPort }
  | { ok: false; code: "MODEL_VERSION_UNAVAILABLE"; message: string };

/**
 * Which loaded model answers a work item (docs/model-upgrades.md). Without one, the processor's one
 * model answers everything. `src/processor/model-switch.ts` implements it: online items by the group's
 * decision and their partition's boundary offset, backfill rows by their run's recorded version.
 */
export interface ModelRouter {
  choose(item: RoutedItem): ModelChoice;
  /** Per-partition switching (src/processor/model-switch.ts); a router without it routes by item alone. */
  bind?(partitions: SwitchPartitions): void;
  /** A restored online partition runs from `offset`; `hold` = keep it paused (refused). */
  onRestored?(task: SwitchTask, offset: string, boundary: ModelBoundary | undefined): "run" | "hold";
  /** The partition must not take records (it may not serve with what this instance has). */
  refuses?(key: string): boolean;
  refusals?(): { key: string; message: string }[];
  forget?(key: string): void;
}

/** Items grouped by the model that answers them (first-seen order), and the refused ones. Pure. */
export function groupByModel<T extends RoutedItem>(
  items: readonly T[],
  router: ModelRouter | undefined,
  fallback: ModelPort,
): { groups: { model: ModelPort; items: T[] }[]; refused: { item: T; code: string; message: string }[] } {
  const groups = new Map<ModelPort, T[]>();
  const refused: { item: T; code: string; message: string }[] = [];
  for (const item of items) {
    const choice: ModelChoice = router ? router.choose(item) : { ok: true, model: fallback };
    if (!choice.ok) {
      refused.push({ item, code: choice.code, message: choice.message });
      continue;
    }
    const list = groups.get(choice.model);
    if (list) list.push(item);
    else groups.set(choice.model, [item]);
  }
  return { groups: [...groups].map(([model, list]) => ({ model, items: list })), refused };
}
