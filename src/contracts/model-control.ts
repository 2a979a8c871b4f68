/**
 * The records of the model control topic (`topics.modelControl`, compacted; docs/model-upgrades.md).
 * Wire format: JSON, keyed so that compaction keeps the whole history of one group's switches:
 *
 * - a **decision** (`decision/<group>/<seq>`), written by `sluice model promote|rollback`: from now on
 *   online requests of the group get `version`;
 * - a **boundary** (`boundary/<group>/<seq>/<topic>/<partition>`), written by the partition's owner in
 *   the partition's transaction: records of that partition at or after `offset` are answered by
 *   `version`, the ones before by `previousVersion`. The same record goes to the partition's dedup
 *   changelog under MODEL_BOUNDARY_KEY, where the next owner's restore reads it.
 */
export interface ModelDecision {
  kind: "sluice.model-decision";
  groupId: string;
  /** 1, 2, …: each decision of a group one more than the last. */
  seq: number;
  action: "promote" | "rollback";
  /** The version online requests get from this decision on. */
  version: string;
  /** The version online requests got before it. */
  previousVersion: string;
  decidedAt: string;
  /** `promote --after-run RUN`: the backfill run checked complete with `version`. */
  afterRun?: string;
}

export interface ModelBoundary {
  kind: "sluice.model-boundary";
  groupId: string;
  /** The decision this boundary carries out. */
  seq: number;
  topic: string;
  partition: number;
  /** The first input offset answered by `version` (decimal). */
  offset: string;
  version: string;
  previousVersion: string;
  /** The member that switched the partition (`observability.instanceId`). */
  instanceId: string;
  switchedAt: string;
}

/**
 * Key of the boundary record in a partition's dedup changelog (value: the ModelBoundary JSON). 0xFF
 * never occurs in UTF-8, so it cannot collide with a request id (like the offset checkpoint's).
 */
export const MODEL_BOUNDARY_KEY: Buffer = Buffer.concat([
  Buffer.from([0xff]),
  Buffer.from("sluice.model-boundary"),
]);

const pad = (seq: number) => String(seq).padStart(10, "0");

export function decisionKey(groupId: string, seq: number): string {
  return `decision/${groupId}/${pad(seq)}`;
}

export function boundaryKey(b: Pick<ModelBoundary, "groupId" | "seq" | "topic" | "partition">): string {
  return `boundary/${b.groupId}/${pad(b.seq)}/${b.topic}/${b.partition}`;
}

export function encodeModelControl(record: ModelDecision | ModelBoundary): string {
  return JSON.stringify(record);
}

/** A decision or a boundary, or null when `value` is neither (a tombstone, another record, garbage). */
export function decodeModelControl(value: Buffer | string | null): ModelDecision | ModelBoundary | null {
  if (value === null) return null;
  try {
    const v = JSON.parse(value.toString()) as {
      kind?: unknown;
      groupId?: unknown;
      seq?: unknown;
      version?: unknown;
      offset?: unknown;
    };
    if (typeof v.groupId !== "string" || typeof v.seq !== "number" || typeof v.version !== "string")
      return null;
    if (v.kind === "sluice.model-decision") return v as unknown as ModelDecision;
    if (v.kind === "sluice.model-boundary" && typeof v.offset === "string" && /^\d{1,19}$/.test(v.offset))
      return v as unknown as ModelBoundary;
    return null;
  } catch {
    return null;
  }
}

/** The boundary in a changelog value, or undefined. */
export function decodeModelBoundary(value: Buffer | string | null | undefined): ModelBoundary | undefined {
  const record = decodeModelControl(value ?? null);
  return record?.kind === "sluice.model-boundary" ? record : undefined;
}

/**
 * What the control topic says of one group: its decisions in order and the boundaries of each
 * partition, latest first. Built by folding records in log order (`foldModelControl`).
 */
export interface ModelControlState {
  decisions: ModelDecision[];
  /** `<topic>:<partition>` → that partition's boundaries, in log order. */
  boundaries: Map<string, ModelBoundary[]>;
}

export function emptyModelControl(): ModelControlState {
  return { decisions: [], boundaries: new Map() };
}

/** Adds one record of the group to `state` (records of other groups are ignored). Mutates `state`. */
export function foldModelControl(state: ModelControlState, groupId: string, value: Buffer | null): void {
  const record = decodeModelControl(value);
  if (record === null || record.groupId !== groupId) return;
  if (record.kind === "sluice.model-decision") {
    if (!state.decisions.some((d) => d.seq === record.seq)) state.decisions.push(record);
    state.decisions.sort((a, b) => a.seq - b.seq);
    return;
  }
  const key = `${record.topic}:${record.partition}`;
  const list = state.boundaries.get(key) ?? [];
  if (!list.some((b) => b.seq === record.seq)) list.push(record);
  list.sort((a, b) => a.seq - b.seq);
  state.boundaries.set(key, list);
}

/** The group's last decision, or undefined when it never decided (online = the `model` section). */
export function lastDecision(state: ModelControlState): ModelDecision | undefined {
  return state.decisions[state.decisions.length - 1];
}
