import type { Lane } from "../contracts/lane.js";
import type { TopicPartition } from "../contracts/topic-partition.js";
import type { ModelPort } from "../model/model-port.js";

/** What a router needs to know of a work item (src/processor/request-intake.ts `WorkItem` fits). */
export interface RoutedItem {
  lane: Lane;
  task: { tp: TopicPartition };
  source: { offset: string };
  runId: string | undefined;
  modelVersion?: string | undefined;
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
