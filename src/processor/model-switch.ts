import {
  boundaryKey,
  encodeModelControl,
  MODEL_BOUNDARY_KEY,
  type ModelBoundary,
  type ModelDecision,
} from "../contracts/model-control.js";
import { type OffsetOrder, offsetOrder, offsetText } from "../contracts/offset-order.js";
import { type TopicPartition, topicPartitionKey } from "../contracts/topic-partition.js";
import type { ModelPort } from "../model/model-port.js";
import type { ModelChoice, ModelRouter, RoutedItem, SwitchPartitions, SwitchTask } from "./model-router.js";

/** The models an instance has, by version (src/model/model-set.ts `ModelSet` fits). */
export interface VersionedModels {
  /** The `model` section's model: what online requests get while the group has decided nothing. */
  readonly serving: { model: ModelPort };
  byVersion(version: string): ModelPort | undefined;
  versions(): string[];
}

/** What the switch tells the world (src/app wires it to the log and the events). */
export interface SwitchReport {
  switched(boundary: ModelBoundary): void;
  refused(tp: TopicPartition, message: string): void;
}

export interface ModelSwitchOptions {
  groupId: string;
  instanceId: string;
  /** `topics.modelControl`; unset = no control topic (no decisions: online gets the serving model). */
  controlTopic?: string;
  /** The group's last decision as this instance has read it (src/kafka/runs/model-control-feed.ts). */
  decision?: () => ModelDecision | undefined;
  report?: SwitchReport;
  now?: () => Date;
}

/** One online partition: which version answers which offsets, and whether it may not serve. */
interface PartitionModel {
  /** From `from` on, `version` answers (ascending); the first covers everything below the next. */
  segments: { from: OffsetOrder; version: string; seq: number }[];
  /** The decision this partition carries out (its boundary committed or attached). */
  seq: number;
  /** Set while the decided version is not loaded here: the partition is paused, with this message. */
  refused?: string;
}

/** The restore rule's verdict for one partition (pure; `restoreRule`). */
export type RestoreVerdict =
  | { kind: "serve"; version: string; seq: number }
  /** A new decision since the partition's last boundary: switch at the restored offset. */
  | { kind: "switch"; version: string; previousVersion: string; seq: number }
  | { kind: "refuse"; version: string; seq: number };

/**
 * The rule a restored partition follows (docs/model-upgrades.md, "The boundary"). `boundary` is the
 * last one committed in the partition's changelog; `decision` the group's last as this instance read
 * it. A boundary never commits before the records below it (the committer attaches it to the first
 * transaction at or past its offset), so the restored offset is at or past it, and everything from
 * there on gets the boundary's version, unless a newer decision waits: then the switch happens at the
 * restored offset. A boundary newer than the decision we know (our feed lags) wins: it is what was
 * answered. A version this instance lacks means refusing, never another version.
 */
export function restoreRule(
  decision: ModelDecision | undefined,
  boundary: ModelBoundary | undefined,
  servingVersion: string,
  has: (version: string) => boolean,
): RestoreVerdict {
  const current = boundary && (!decision || boundary.seq >= decision.seq) ? boundary : undefined;
  if (current) {
    return has(current.version)
      ? { kind: "serve", version: current.version, seq: current.seq }
      : { kind: "refuse", version: current.version, seq: current.seq };
  }
  if (!decision) return { kind: "serve", version: servingVersion, seq: 0 };
  if (!has(decision.version)) return { kind: "refuse", version: decision.version, seq: decision.seq };
  return {
    kind: "switch",
    version: decision.version,
    previousVersion: boundary?.version ?? decision.previousVersion,
    seq: decision.seq,
  };
}

/**
 * Which model answers each item (docs/model-upgrades.md), and the per-partition switch at a recorded
 * boundary. Online items: by their partition's segments (the version before the boundary offset, the
 * decided one from it on). Backfill rows of a run submitted with `--model candidate` carry the
 * candidate's version (`sluice.model-version`) and get the loaded model of exactly that version;
 * other rows get the version online answers with. A version this instance lacks is never replaced
 * by another: a backfill row becomes a `MODEL_VERSION_UNAVAILABLE` dead letter, an online partition
 * stays paused (readiness false) until a decision it can carry out.
 */
export class ModelSwitch implements ModelRouter {
  private readonly states = new Map<string, PartitionModel>();
  private partitions: SwitchPartitions | undefined;
  private readonly opts: ModelSwitchOptions;

  constructor(
    private readonly models: VersionedModels,
    options?: Partial<ModelSwitchOptions>,
  ) {
    this.opts = { groupId: "", instanceId: "", ...options };
  }

  /** The version online requests are answered with now: the last decision's, else the serving model's. */
  onlineVersion(): string {
    return this.opts.decision?.()?.version ?? this.models.serving.model.identity.version;
  }

  /** Online partitions that refuse to serve (the decided version is not loaded here), with why. */
  refusals(): { key: string; message: string }[] {
    return [...this.states]
      .filter(([, s]) => s.refused)
      .map(([key, s]) => ({ key, message: s.refused as string }));
  }

  /** The segments of an owned online partition, for status and tests. */
  partition(key: string): { from: string; version: string; seq: number }[] | undefined {
    return this.states.get(key)?.segments.map((s) => ({ ...s, from: offsetText(s.from) }));
  }

  bind(partitions: SwitchPartitions): void {
    this.partitions = partitions;
  }

  forget(key: string): void {
    this.states.delete(key);
  }

  refuses(key: string): boolean {
    return this.states.get(key)?.refused !== undefined;
  }

  /**
   * A restored online partition runs from `offset`: applies `restoreRule`. Returns `hold` when it must
   * stay paused (refused).
   */
  onRestored(task: SwitchTask, offset: string, boundary: ModelBoundary | undefined): "run" | "hold" {
    const verdict = restoreRule(
      this.opts.decision?.(),
      boundary,
      this.models.serving.model.identity.version,
      (v) => this.models.byVersion(v) !== undefined,
    );
    const from = offsetOrder(offset);
    const state: PartitionModel = {
      segments: [{ from, version: verdict.version, seq: verdict.seq }],
      seq: verdict.seq,
    };
    // By construction the restored offset is at or past the boundary; should it not be, the offsets
    // below the boundary still get the version before it.
    if (verdict.kind === "serve" && boundary?.seq === verdict.seq && offsetOrder(boundary.offset) > from)
      state.segments = [
        { from, version: boundary.previousVersion, seq: verdict.seq - 1 },
        { from: offsetOrder(boundary.offset), version: verdict.version, seq: verdict.seq },
      ];
    this.states.set(task.key, state);
    if (verdict.kind === "refuse") {
      this.refuse(task.tp, state, verdict.version);
      return "hold";
    }
    if (verdict.kind === "switch")
      this.attachBoundary(task, state, offset, verdict.version, verdict.previousVersion);
    return "run";
  }

  /**
   * A new decision was read: every running online partition switches at its next untaken offset (the
   * records taken before it keep the version they were taken with), or is paused when the decided
   * version is not loaded here. Partitions restoring now apply it when they finish (`onRestored`).
   */
  onDecision(decision: ModelDecision): void {
    for (const task of this.partitions?.running() ?? []) {
      const state = this.states.get(task.key);
      if (state === undefined || state.seq >= decision.seq) continue;
      const at = task.takenOffset;
      if (this.models.byVersion(decision.version) === undefined) {
        // Records from `at` on are not taken while refused; the ones below keep their version.
        state.seq = decision.seq;
        this.refuse(task.tp, state, decision.version);
        this.partitions?.pause(task.tp);
        continue;
      }
      const previous = state.segments[state.segments.length - 1]?.version ?? decision.previousVersion;
      state.segments.push({ from: offsetOrder(at), version: decision.version, seq: decision.seq });
      this.attachBoundary(task, state, at, decision.version, previous, decision.seq);
      if (state.refused !== undefined) {
        state.refused = undefined;
        this.partitions?.resume(task.tp);
      }
    }
  }

  choose(item: RoutedItem): ModelChoice {
    let wanted: string;
    if (item.lane === "backfill") wanted = item.modelVersion ?? this.onlineVersion();
    else wanted = this.versionAt(item.task.tp, offsetOrder(item.source.offset));
    const model = this.models.byVersion(wanted);
    if (model) return { ok: true, model };
    return {
      ok: false,
      code: "MODEL_VERSION_UNAVAILABLE",
      message: unavailable(wanted, this.models.versions(), item.runId),
    };
  }

  /** The version that answers `offset` of an online partition. */
  private versionAt(tp: TopicPartition, offset: OffsetOrder): string {
    const state = this.states.get(topicPartitionKey(tp.topic, tp.partition));
    if (!state) return this.onlineVersion();
    let version = state.segments[0]?.version ?? this.onlineVersion();
    for (const s of state.segments) if (s.from <= offset) version = s.version;
    return version;
  }

  private refuse(tp: TopicPartition, state: PartitionModel, version: string): void {
    state.refused = `MODEL_VERSION_UNAVAILABLE: ${tp.topic}[${tp.partition}] must be answered by model version ${version} (the group's decision), and this instance has only ${this.models.versions().join(", ")}: set candidate.path (SLUICE_CANDIDATE__PATH) or model.path to that model and restart, or roll back (sluice model rollback)`;
    this.opts.report?.refused(tp, state.refused);
  }

  /** Writes the boundary in the partition's transaction: to its changelog and to the control topic. */
  private attachBoundary(
    task: SwitchTask,
    state: PartitionModel,
    offset: string,
    version: string,
    previousVersion: string,
    seq = state.seq,
  ): void {
    state.seq = seq;
    const boundary: ModelBoundary = {
      kind: "sluice.model-boundary",
      groupId: this.opts.groupId,
      seq,
      topic: task.tp.topic,
      partition: task.tp.partition,
      offset,
      version,
      previousVersion,
      instanceId: this.opts.instanceId,
      switchedAt: (this.opts.now?.() ?? new Date()).toISOString(),
    };
    const value = encodeModelControl(boundary);
    const control = this.opts.controlTopic;
    task.committer?.attach?.({
      outputs: control ? [{ topic: control, key: boundaryKey(boundary), value }] : [],
      bookkeeping: [
        { topic: task.changelogTopic, partition: task.tp.partition, key: MODEL_BOUNDARY_KEY, value },
      ],
      atOffset: offset,
      onCommitted: () => {
        // Everything below the boundary is committed now: older segments are done.
        const i = state.segments.findIndex((s) => s.seq === seq);
        if (i > 0) state.segments.splice(0, i);
        this.opts.report?.switched(boundary);
      },
    });
  }
}

/** What a refusal says: the version wanted, what this instance has, and what to set. */
export function unavailable(wanted: string, have: readonly string[], runId?: string): string {
  const what = runId
    ? `run ${runId} was submitted for model version ${wanted}`
    : `model version ${wanted} is wanted`;
  return `${what}, but this instance has only ${have.join(", ")}: set candidate.path (SLUICE_CANDIDATE__PATH) or model.path to that model on every serve instance${runId ? ", then resubmit the failed rows under a new run id" : ""}`;
}
