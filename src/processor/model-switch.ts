import type { ModelPort } from "../model/model-port.js";
import type { ModelChoice, ModelRouter, RoutedItem } from "./model-router.js";

/** The models an instance has, by version (src/model/model-set.ts `ModelSet` fits). */
export interface VersionedModels {
  /** The `model` section's model: what online requests get while the group has decided nothing. */
  readonly serving: { model: ModelPort };
  byVersion(version: string): ModelPort | undefined;
  versions(): string[];
}

/**
 * Which model answers each item (docs/model-upgrades.md). Backfill rows of a run submitted with
 * `--model candidate` carry the candidate's version (`sluice.model-version`) and get the loaded model
 * of that version, or a `MODEL_VERSION_UNAVAILABLE` dead letter when this instance has none (it would
 * otherwise answer the run with another version); other rows, and online requests, get the version
 * online answers with.
 */
export class ModelSwitch implements ModelRouter {
  constructor(private readonly models: VersionedModels) {}

  /** The version online requests are answered with now. */
  onlineVersion(): string {
    return this.models.serving.model.identity.version;
  }

  choose(item: RoutedItem): ModelChoice {
    const wanted = item.lane === "backfill" && item.modelVersion ? item.modelVersion : this.onlineVersion();
    const model = this.models.byVersion(wanted);
    if (model) return { ok: true, model };
    return {
      ok: false,
      code: "MODEL_VERSION_UNAVAILABLE",
      message: unavailable(wanted, this.models.versions(), item.runId),
    };
  }
}

/** What a refusal says: the version wanted, what this instance has, and what to set. */
export function unavailable(wanted: string, have: readonly string[], runId?: string): string {
  const what = runId
    ? `run ${runId} was submitted for model version ${wanted}`
    : `model version ${wanted} is wanted`;
  return `${what}, but this instance has only ${have.join(", ")}: set candidate.path (SLUICE_CANDIDATE__PATH) or model.path to that model on every serve instance${runId ? ", then resubmit the failed rows under a new run id" : ""}`;
}
