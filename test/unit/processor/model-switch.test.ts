import { describe, expect, it } from "vitest";
import type { ModelBoundary, ModelDecision } from "../../../src/contracts/model-control.js";
import { decodeModelBoundary, MODEL_BOUNDARY_KEY } from "../../../src/contracts/model-control.js";
import { topicPartitionKey } from "../../../src/contracts/topic-partition.js";
import type { AttachedUnit } from "../../../src/delivery/partition-committer.js";
import type { ModelPort } from "../../../src/model/model-port.js";
import type { RoutedItem, SwitchTask } from "../../../src/processor/model-router.js";
import { ModelSwitch, restoreRule } from "../../../src/processor/model-switch.js";

const model = (version: string) => ({ identity: { name: `m-${version}`, version } }) as unknown as ModelPort;
const A = model("aaaaaaaaaaaa");
const B = model("bbbbbbbbbbbb");
const models = (...loaded: ModelPort[]) => ({
  serving: { model: loaded[0] as ModelPort },
  byVersion: (v: string) => loaded.find((m) => m.identity.version === v),
  versions: () => loaded.map((m) => m.identity.version),
});
const a = A.identity.version;
const b = B.identity.version;

const decision = (seq: number, version: string, previousVersion: string): ModelDecision => ({
  kind: "sluice.model-decision",
  groupId: "g",
  seq,
  action: "promote",
  version,
  previousVersion,
  decidedAt: "2026-12-02T00:00:00.000Z",
});
const boundary = (seq: number, offset: string, version: string, previousVersion: string): ModelBoundary => ({
  kind: "sluice.model-boundary",
  groupId: "g",
  seq,
  topic: "q",
  partition: 0,
  offset,
  version,
  previousVersion,
  instanceId: "i",
  switchedAt: "2026-12-02T00:00:00.000Z",
});
const has =
  (...vs: string[]) =>
  (v: string) =>
    vs.includes(v);

describe("restoreRule: what a restored partition answers with", () => {
  it("no decision: the serving model (the model section), nothing to write", () => {
    expect(restoreRule(undefined, undefined, a, has(a))).toEqual({ kind: "serve", version: a, seq: 0 });
  });
  it("a decision the partition has not carried out: switch at the restored offset", () => {
    expect(restoreRule(decision(1, b, a), undefined, a, has(a, b))).toEqual({
      kind: "switch",
      version: b,
      previousVersion: a,
      seq: 1,
    });
    // After a rollback the previous version is the partition's last boundary's.
    expect(restoreRule(decision(2, a, b), boundary(1, "10", b, a), a, has(a, b))).toMatchObject({
      kind: "switch",
      version: a,
      previousVersion: b,
      seq: 2,
    });
  });
  it("the partition's boundary of the last decision: serve its version (a restart reads the decision)", () => {
    expect(restoreRule(decision(1, b, a), boundary(1, "10", b, a), a, has(a, b))).toEqual({
      kind: "serve",
      version: b,
      seq: 1,
    });
  });
  it("a boundary newer than the decision this instance read (its feed lags): the boundary wins", () => {
    expect(restoreRule(decision(1, b, a), boundary(2, "30", a, b), a, has(a, b))).toEqual({
      kind: "serve",
      version: a,
      seq: 2,
    });
  });
  it("a decided version this instance lacks: refuse, never another version", () => {
    expect(restoreRule(decision(1, b, a), undefined, a, has(a))).toEqual({
      kind: "refuse",
      version: b,
      seq: 1,
    });
    expect(restoreRule(undefined, boundary(1, "5", b, a), a, has(a))).toMatchObject({
      kind: "refuse",
      version: b,
    });
  });
});

/** A running online task whose committer records what is attached. */
function task(takenOffset: string) {
  const attached: AttachedUnit[] = [];
  const t: SwitchTask & { takenOffset: string } = {
    tp: { topic: "q", partition: 0 },
    key: topicPartitionKey("q", 0),
    changelogTopic: "changelog.q",
    takenOffset,
    committer: { attach: (u: AttachedUnit) => attached.push(u) },
  };
  return { t, attached };
}
const item = (offset: string, extra: Partial<RoutedItem> = {}): RoutedItem => ({
  lane: "online",
  task: { tp: { topic: "q", partition: 0 } },
  source: { offset },
  runId: undefined,
  ...extra,
});
const versionOf = (sw: ModelSwitch, i: RoutedItem) => {
  const c = sw.choose(i);
  return c.ok ? c.model.identity.version : c.code;
};

describe("ModelSwitch: one switch per partition, at one offset", () => {
  it("a decision while running: records taken before keep the old version, from the next offset the new one", () => {
    let current: ModelDecision | undefined;
    const sw = new ModelSwitch(models(A, B), {
      groupId: "g",
      instanceId: "i",
      controlTopic: "ctl",
      decision: () => current,
    });
    const { t, attached } = task("100");
    expect(sw.onRestored(t, "100", undefined)).toBe("run");
    expect(attached).toHaveLength(0); // no decision: nothing to record
    t.takenOffset = "120"; // 100..119 taken with a
    current = decision(1, b, a);
    sw.bind({ running: () => [t], pause: () => {}, resume: () => {} });
    sw.onDecision(current);
    expect(versionOf(sw, item("119"))).toBe(a);
    expect(versionOf(sw, item("120"))).toBe(b);
    expect(versionOf(sw, item("500"))).toBe(b);
    expect(attached).toHaveLength(1);
    const unit = attached[0] as AttachedUnit;
    expect(unit.atOffset).toBe("120");
    // The same boundary to the control topic and to the partition's changelog (where a restore reads it).
    expect(unit.outputs.map((m) => m.topic)).toEqual(["ctl"]);
    expect(unit.bookkeeping[0]?.key).toEqual(MODEL_BOUNDARY_KEY);
    expect(decodeModelBoundary(unit.bookkeeping[0]?.value as string)).toMatchObject({
      seq: 1,
      offset: "120",
      version: b,
      previousVersion: a,
      topic: "q",
      partition: 0,
    });
    // The same decision read again changes nothing (one switch per decision).
    sw.onDecision(current);
    expect(attached).toHaveLength(1);
    unit.onCommitted();
    expect(sw.partition(t.key)).toEqual([{ from: "120", version: b, seq: 1 }]);
  });

  it("a restart after the boundary committed answers with the decided version from the restored offset", () => {
    const sw = new ModelSwitch(models(A, B), { decision: () => decision(1, b, a) });
    const { t, attached } = task("130");
    expect(sw.onRestored(t, "130", boundary(1, "120", b, a))).toBe("run");
    expect(attached).toHaveLength(0);
    expect(versionOf(sw, item("130"))).toBe(b);
  });

  it("a restart after a crash before the boundary committed decides again, at the restored offset", () => {
    const sw = new ModelSwitch(models(A, B), { decision: () => decision(1, b, a) });
    const { t, attached } = task("110");
    expect(sw.onRestored(t, "110", undefined)).toBe("run");
    expect(attached.map((u) => u.atOffset)).toEqual(["110"]);
    expect(versionOf(sw, item("110"))).toBe(b);
  });

  it("a member without the decided version refuses online: paused, not ready, never another version", () => {
    let current: ModelDecision | undefined;
    const paused: string[] = [];
    const resumed: string[] = [];
    const sw = new ModelSwitch(models(A), { decision: () => current });
    const { t, attached } = task("50");
    sw.onRestored(t, "50", undefined);
    sw.bind({
      running: () => [t],
      pause: (tp) => paused.push(tp.topic),
      resume: (tp) => resumed.push(tp.topic),
    });
    current = decision(1, b, a);
    sw.onDecision(current);
    expect(paused).toEqual(["q"]);
    expect(sw.refuses(t.key)).toBe(true);
    expect(sw.refusals()[0]?.message).toMatch(/MODEL_VERSION_UNAVAILABLE.*bbbbbbbbbbbb.*candidate\.path/);
    expect(attached).toHaveLength(0); // no boundary: it cannot answer with b
    expect(versionOf(sw, item("49"))).toBe(a); // taken before the decision: answered by a
    // A restart of the same member refuses too.
    const again = new ModelSwitch(models(A), { decision: () => current });
    expect(again.onRestored(task("50").t, "50", undefined)).toBe("hold");
    // A rollback it can carry out releases it, with a boundary of its own.
    current = { ...decision(2, a, b), action: "rollback" };
    sw.onDecision(current);
    expect(resumed).toEqual(["q"]);
    expect(sw.refuses(t.key)).toBe(false);
    expect(attached.map((u) => u.atOffset)).toEqual(["50"]);
  });

  it("backfill rows of a candidate run get exactly their version; other rows the online version", () => {
    const sw = new ModelSwitch(models(A, B), { decision: () => undefined });
    expect(versionOf(sw, item("1", { lane: "backfill", modelVersion: b, runId: "r" }))).toBe(b);
    expect(versionOf(sw, item("1", { lane: "backfill", runId: "r" }))).toBe(a);
    const other = sw.choose(item("1", { lane: "backfill", modelVersion: "cccccccccccc", runId: "r" }));
    expect(other).toMatchObject({ ok: false, code: "MODEL_VERSION_UNAVAILABLE" });
  });
});
