import type { ModelSettings } from "../config/model-settings.js";
import { type LoadedModel, loadModel } from "./model-loader.js";
import type { ModelPort } from "./model-port.js";

/**
 * The roles a loaded model can have in one instance (docs/model-upgrades.md): `serving` is the
 * `model` section, `candidate` the `candidate` section. Which of them online requests get is the
 * group's decision (src/processor/model-switch.ts), by version, not by role.
 */
export type ModelRole = "serving" | "candidate";

/** What loading one model cost: resident memory it added to the process and the time it took. */
export interface ModelLoadCost {
  /** Growth of the process's resident set while it loaded (model sessions on every worker), MiB. */
  rssMiB: number;
  loadMs: number;
}

export interface RoleModel {
  role: ModelRole;
  model: LoadedModel;
  cost: ModelLoadCost;
}

/** What a model outputs, for comparing two of them: its task and output shape, as words. */
export function outputShapeOf(model: LoadedModel): string {
  const d = model.description;
  if ("signature" in d)
    return d.signature.outputs
      .map((o) => `${o.name}[${o.dims.map((d) => d ?? "?").join(",")}] ${o.datatype}`)
      .join("; ");
  if (d.task === "embedding") return `${d.outputSize ?? "?"} dimensions`;
  return `${d.outputSize ?? "?"} classes${d.labels ? ` (${d.labels.join(",")})` : ""}`;
}

/**
 * The models of one instance: the serving model and, with a `candidate` section, the candidate, each
 * with its version (the file fingerprint results carry as `model.version`) and what it cost to load.
 */
export class ModelSet {
  readonly serving: RoleModel;
  readonly candidate: RoleModel | undefined;

  constructor(serving: RoleModel, candidate?: RoleModel) {
    this.serving = serving;
    this.candidate = candidate;
  }

  /** Loads the serving model, then the candidate (one after the other, so each one's memory is its own). */
  static async load(serving: ModelSettings, candidate?: ModelSettings): Promise<ModelSet> {
    const first = await loadMeasured("serving", serving);
    if (candidate === undefined) return new ModelSet(first);
    try {
      return new ModelSet(first, await loadMeasured("candidate", candidate));
    } catch (error) {
      await first.model.close().catch(() => undefined);
      throw error;
    }
  }

  get roles(): RoleModel[] {
    return this.candidate ? [this.serving, this.candidate] : [this.serving];
  }

  /** The loaded model with `version`, or undefined when this instance has none (serving first). */
  byVersion(version: string): LoadedModel | undefined {
    return this.roles.find((r) => r.model.identity.version === version)?.model;
  }

  /** Versions this instance can answer with. */
  versions(): string[] {
    return [...new Set(this.roles.map((r) => r.model.identity.version))];
  }

  /**
   * How the candidate differs from the serving model in what it outputs (a new task or output shape is
   * allowed: it is a new model, but readers of the results must know); empty when alike or no candidate.
   */
  differences(): string[] {
    const c = this.candidate?.model;
    if (c === undefined) return [];
    const s = this.serving.model;
    const out: string[] = [];
    if (c.task !== s.task) out.push(`task ${s.task} → ${c.task}`);
    else if (outputShapeOf(c) !== outputShapeOf(s))
      out.push(`output ${outputShapeOf(s)} → ${outputShapeOf(c)}`);
    return out;
  }

  /**
   * The serving model as the processor's one `ModelPort`, except that the SLO guard's backfill limits
   * reach every model of the set: a candidate's backfill run yields to online work like any other.
   */
  servingPort(): ModelPort {
    const s: ModelPort = this.serving.model;
    const all = this.roles.map((r) => r.model);
    return {
      identity: s.identity,
      task: s.task,
      ...(s.tokenizerHash === undefined ? {} : { tokenizerHash: s.tokenizerHash }),
      ...(s.cpuSource === undefined ? {} : { cpuSource: s.cpuSource }),
      ...(s.workers === undefined ? {} : { workers: s.workers }),
      countTokens: (text) => s.countTokens(text),
      run: (texts, options) => s.run(texts, options),
      // Every loaded model's pool gets the same limits, the CPU budget too: a backfill runs on one
      // model at a time (its run names it), so the budget is not split between them.
      limitBackfill: (limits: Parameters<NonNullable<ModelPort["limitBackfill"]>>[0]) => {
        for (const m of all) m.limitBackfill?.(limits);
      },
      close: () => s.close(),
    };
  }

  async close(): Promise<void> {
    await Promise.all(this.roles.map((r) => r.model.close()));
  }
}

async function loadMeasured(role: ModelRole, settings: ModelSettings): Promise<RoleModel> {
  const before = process.memoryUsage().rss;
  const started = performance.now();
  const model = await loadModel(settings);
  const cost = {
    rssMiB: Math.max(0, Math.round((process.memoryUsage().rss - before) / 1048576)),
    loadMs: Math.round(performance.now() - started),
  };
  return { role, model, cost };
}
