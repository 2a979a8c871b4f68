import type { RunStatusReport } from "../backfill/run-outcomes.js";
import type { SluiceConfig } from "../config/config-schema.js";
import {
  lastDecision,
  type ModelBoundary,
  type ModelControlState,
  type ModelDecision,
} from "../contracts/model-control.js";
import { createKafka } from "../kafka/client/kafka-client.js";
import { ModelControlFeed } from "../kafka/runs/model-control-feed.js";
import { type GroupMember, ModelControlStore } from "../kafka/runs/model-control-store.js";
import { SluiceError } from "../sluice-error.js";
import { configuredModelVersion, roleConfig } from "./model-versions.js";

/** One online partition's switch state: its last boundary, if any. */
export interface PartitionSwitch {
  topic: string;
  partition: number;
  boundary: ModelBoundary | null;
}

/** `sluice model status`: what online answers with, the candidate, each partition's boundary, the history. */
export interface ModelStatus {
  groupId: string;
  /** The version online requests are answered with: the last decision's, else the model section's. */
  online: { version: string | null; source: "decision" | "model section" };
  serving: { name: string; version: string | null };
  candidate: { name: string; version: string | null } | null;
  partitions: PartitionSwitch[];
  /** Partitions whose last boundary is not the last decision's (switch in progress, or a member refuses). */
  pending: number;
  decisions: ModelDecision[];
}

export interface SwitchOptions {
  /** Longest wait for every partition's boundary, ms (`--timeout`). */
  timeoutMs: number;
  /**
   * `promote --after-run RUN`: refuse unless that backfill run is complete with the candidate's
   * version; `runStatus` reads it (the CLI passes `backfillStatus`: no composition root imports another).
   */
  afterRun?: { runId: string; runStatus: (runId: string) => Promise<RunStatusReport> };
  onProgress?: (switched: number, total: number) => void;
}

export interface SwitchSummary {
  decision: ModelDecision;
  boundaries: ModelBoundary[];
  waitedMs: number;
}

/**
 * Composition roots of `sluice model promote|rollback|status` (docs/model-upgrades.md): the control
 * topic store wired to the switch rules. Wiring and the operator's checks only.
 */
export async function modelStatus(config: SluiceConfig): Promise<ModelStatus> {
  const store = controlStore(config);
  const groupId = config.consumer.groupId;
  const [state, partitions, serving, candidate] = await Promise.all([
    store.read(groupId),
    store.partitionsOf(config.topics.requests),
    versionOrNull(config),
    config.candidate ? versionOrNull(roleConfig(config, "candidate", "status")) : Promise.resolve(null),
  ]);
  const last = lastDecision(state);
  const rows = partitions.map((p) => ({ ...p, boundary: lastBoundary(state, p) }));
  return {
    groupId,
    online: last
      ? { version: last.version, source: "decision" }
      : { version: serving, source: "model section" },
    serving: { name: config.model.name, version: serving },
    candidate: config.candidate ? { name: config.candidate.name, version: candidate } : null,
    partitions: rows,
    pending: last ? rows.filter((r) => r.boundary?.seq !== last.seq).length : 0,
    decisions: state.decisions,
  };
}

/** `sluice model promote`: the candidate answers online, group-wide, from each partition's boundary. */
export async function promoteModel(config: SluiceConfig, opts: SwitchOptions): Promise<SwitchSummary> {
  const target = await configuredModelVersion(roleConfig(config, "candidate", "sluice model promote"));
  if (opts.afterRun !== undefined)
    await assertRunScoredBy(await opts.afterRun.runStatus(opts.afterRun.runId), target);
  return decide(config, "promote", () => target, opts);
}

/** `sluice model rollback`: online returns to the version before the last decision. */
export async function rollbackModel(config: SluiceConfig, opts: SwitchOptions): Promise<SwitchSummary> {
  return decide(
    config,
    "rollback",
    (last) => {
      if (!last) {
        throw new SluiceError(
          "MODEL_DECISION_REFUSED",
          `group ${config.consumer.groupId} never promoted a model (nothing in ${config.topics.modelControl}), so there is nothing to roll back`,
        );
      }
      return last.previousVersion;
    },
    opts,
  );
}

async function decide(
  config: SluiceConfig,
  action: ModelDecision["action"],
  targetOf: (last: ModelDecision | undefined) => string,
  opts: SwitchOptions,
): Promise<SwitchSummary> {
  const store = controlStore(config);
  await store.ensureTopic();
  const groupId = config.consumer.groupId;
  const last = lastDecision(await store.read(groupId));
  const target = targetOf(last);
  const current = last?.version ?? (await configuredModelVersion(config));
  if (target === current) {
    throw new SluiceError(
      "MODEL_DECISION_REFUSED",
      `online requests of group ${groupId} are already answered by model version ${target}; nothing to ${action}`,
    );
  }
  const decision: ModelDecision = {
    kind: "sluice.model-decision",
    groupId,
    seq: (last?.seq ?? 0) + 1,
    action,
    version: target,
    previousVersion: current,
    decidedAt: new Date().toISOString(),
    ...(opts.afterRun ? { afterRun: opts.afterRun.runId } : {}),
  };
  await store.writeDecision(decision);
  return waitForBoundaries(config, store, decision, opts);
}

/**
 * Follows the control topic (one consumer, not a read per poll: the serve instances share the machine)
 * until every online partition has the decision's boundary, or the timeout.
 */
async function waitForBoundaries(
  config: SluiceConfig,
  store: ModelControlStore,
  decision: ModelDecision,
  opts: SwitchOptions,
): Promise<SwitchSummary> {
  const started = Date.now();
  const partitions = await store.partitionsOf(config.topics.requests);
  const feed = new ModelControlFeed({
    kafka: controlKafka(config),
    topic: config.topics.modelControl,
    groupId: decision.groupId,
    startTimeoutMs: opts.timeoutMs,
  });
  await feed.start();
  try {
    let reported = -1;
    for (;;) {
      const state = feed.state();
      const boundaries = partitions.map((p) => boundaryOf(state, p, decision.seq));
      const missing = partitions.filter((_, i) => boundaries[i] === undefined);
      if (missing.length !== reported)
        opts.onProgress?.(partitions.length - missing.length, partitions.length);
      reported = missing.length;
      if (missing.length === 0)
        return { decision, boundaries: boundaries as ModelBoundary[], waitedMs: Date.now() - started };
      if (Date.now() - started > opts.timeoutMs) {
        const members = await store.members(decision.groupId).catch(() => [] as GroupMember[]);
        throw new SluiceError(
          "MODEL_SWITCH_TIMEOUT",
          `decision ${decision.seq} (${decision.action} to ${decision.version}) is recorded, but within ${opts.timeoutMs} ms ${missing.length} of ${partitions.length} online partitions did not switch: ${describeMissing(missing, members)}. Those members refuse online requests until they can switch (see their MODEL_VERSION_UNAVAILABLE log lines and /readyz); fix them, or run sluice model rollback`,
          { context: { seq: String(decision.seq) } },
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await feed.stop();
  }
}

function describeMissing(missing: { topic: string; partition: number }[], members: GroupMember[]): string {
  const owner = (p: { topic: string; partition: number }) =>
    members.find((m) => m.partitions.some((q) => q.topic === p.topic && q.partition === p.partition));
  const byMember = new Map<string, string[]>();
  for (const p of missing) {
    const m = owner(p);
    const name = m ? `member ${m.memberId} (${m.host})` : "no member (unassigned)";
    byMember.set(name, [...(byMember.get(name) ?? []), `${p.topic}[${p.partition}]`]);
  }
  return [...byMember].map(([name, ps]) => `${name}: ${ps.join(", ")}`).join("; ");
}

/** `--after-run RUN`: the run is complete, without failures, and every result came from `version` (the candidate). Pure. */
export function assertRunScoredBy(report: RunStatusReport, version: string): void {
  const runId = report.runId;
  const others = report.modelVersions.filter((v) => v.version !== version);
  const problems = [
    ...(report.done
      ? []
      : [`it is not complete (${report.rowsDone} of ${report.rowsTotal ?? "?"} rows done)`]),
    ...(report.expectedModelVersion === version
      ? []
      : [
          `it was submitted for model version ${report.expectedModelVersion ?? "unknown"}, not the candidate's ${version}`,
        ]),
    ...(others.length === 0
      ? []
      : [
          `${others.reduce((n, v) => n + v.rows, 0)} of its results come from other versions (${others.map((v) => v.version).join(", ")})`,
        ]),
    ...(report.rowsFailed === 0 ? [] : [`${report.rowsFailed} rows failed`]),
  ];
  if (problems.length > 0) {
    throw new SluiceError(
      "MODEL_DECISION_REFUSED",
      `promote --after-run ${runId}: ${problems.join("; ")}. Re-embed the corpus with sluice backfill submit --model candidate and promote once it is complete`,
    );
  }
}

function lastBoundary(
  state: ModelControlState,
  p: { topic: string; partition: number },
): ModelBoundary | null {
  const list = state.boundaries.get(`${p.topic}:${p.partition}`) ?? [];
  return list[list.length - 1] ?? null;
}

function boundaryOf(
  state: Readonly<ModelControlState>,
  p: { topic: string; partition: number },
  seq: number,
): ModelBoundary | undefined {
  return state.boundaries.get(`${p.topic}:${p.partition}`)?.find((b) => b.seq === seq);
}

async function versionOrNull(config: SluiceConfig): Promise<string | null> {
  try {
    return await configuredModelVersion(config);
  } catch {
    return null;
  }
}

function controlKafka(config: SluiceConfig) {
  return createKafka(config.kafka, undefined, { clientId: `${config.kafka.clientId}-model-control` });
}

function controlStore(config: SluiceConfig): ModelControlStore {
  return new ModelControlStore({
    kafka: controlKafka(config),
    topic: config.topics.modelControl,
    replicationFactor: config.topics.replicationFactor,
  });
}
