import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { createTopics, uniqueName } from "../support/kafka-harness.js";
import {
  groupProgress,
  killLeftovers,
  readCommitted,
  resultIds,
  type SentTraffic,
  type ServeProcess,
  serveEnv,
  startServe,
  startTraffic,
  waitForProgress,
} from "../support/serve-process.js";
import { createTinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

/** The JSON log lines of a process (stdout and stderr both carry pino lines here). */
function jsonLines(p: ServeProcess): { raw: string; line: Record<string, unknown> }[] {
  return p
    .output()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((raw) => ({ raw, line: JSON.parse(raw) as Record<string, unknown> }));
}

/**
 * For `waitFor`: true once the process, after output offset `since`, was assigned partitions and
 * restored every one of them (restoring fences the producers of the partition's previous owner).
 */
function restoredAssignmentSince(since: number): (output: string) => boolean {
  return (output) => {
    const lines = output
      .slice(since)
      .split("\n")
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as { msg?: string; partitions?: number[]; partition?: number }];
        } catch {
          return [];
        }
      });
    const assigned = lines.findLast((l) => l.msg === "partitions assigned");
    const restored = new Set(lines.filter((l) => l.msg === "partition restored").map((l) => l.partition));
    return assigned !== undefined && (assigned.partitions ?? []).every((p) => restored.has(p));
  };
}

/** Resolves once the group committed `records` more input records than it had at the call. */
async function progressBy(group: string, topic: string, records: number): Promise<void> {
  const { committed } = await groupProgress(group, topic);
  await waitForProgress(group, topic, (p) => p.committed >= committed + records);
}

// Group mechanics (zombie fencing, rebalances) with the tiny generated model: these tests are about
// Kafka ownership, and the real model would only make them slower on 2 cores (the crash test uses it).
describe("sluice serve in a consumer group", () => {
  let dir: string;
  let modelEnv: Record<string, string>;
  const procs: ServeProcess[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-group-"));
    const tiny = await createTinyModel(dir, { task: "embedding" });
    modelEnv = tinyModelEnv(tiny);
  });
  afterEach(() => killLeftovers(procs));
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function verify(base: string, sent: SentTraffic): Promise<void> {
    const results = await readCommitted(`${base}.results`, { expected: sent.validIds.size });
    const counts = new Map<string, number>();
    for (const id of resultIds(results)) counts.set(id, (counts.get(id) ?? 0) + 1);
    const doubled = [...counts].filter(([, n]) => n > 1);
    if (doubled.length > 0) {
      // Diagnostics: where each copy came from and what the instances logged.
      for (const r of results) {
        const d = decodeResult(r.value as Buffer, r.headers as Record<string, string>);
        if ((counts.get(d.id) as number) > 1)
          console.log(
            JSON.stringify({
              id: d.id,
              source: d.source,
              completedAt: d.timing.completedAt,
              resultPartition: r.partition,
              resultOffset: r.offset,
            }),
          );
      }
      for (const p of procs)
        console.log(
          p
            .output()
            .split("\n")
            .filter((l) => !/"level":30,.*"msg":"stream processor started"/.test(l))
            .join("\n")
            .slice(-6000),
        );
    }
    expect(doubled).toEqual([]);
    expect([...sent.validIds].filter((id) => !counts.has(id))).toEqual([]);
    expect(counts.size).toBe(sent.validIds.size);
    const dead = await readCommitted(`${base}.dlq`, { expected: sent.malformedKeys.length });
    expect(dead.map((d) => d.key).sort()).toEqual([...sent.malformedKeys].sort());
  }

  function start(base: string): ServeProcess {
    const p = startServe([], serveEnv(base, modelEnv));
    procs.push(p);
    return p;
  }

  it("a SIGSTOPped zombie is fenced after its partitions move: no duplicate, no loss", async () => {
    const base = uniqueName("zombie");
    const topic = `${base}.requests`;
    await createTopics([{ topic, numPartitions: 4 }]);
    const a = start(base);
    const b = start(base);
    await Promise.all([a.waitFor(/sluice serve running/), b.waitFor(/sluice serve running/)]);
    const traffic = startTraffic(topic);
    await waitForProgress(`${base}-group`, topic, (p) => p.committed > 200);
    // Freeze A past the 6 s session timeout: B takes over A's partitions and fences A's producers.
    const frozenAt = b.output().length;
    a.child.kill("SIGSTOP");
    await b.waitFor(restoredAssignmentSince(frozenAt), 60_000);
    // A wakes with stale state and open transactions: fenced, it resets and restores what it owns now.
    const wokenAt = a.output().length;
    a.child.kill("SIGCONT");
    await a.waitFor((output) => output.slice(wokenAt).includes('"msg":"partition restored"'), 60_000);
    await progressBy(`${base}-group`, topic, 200); // both at work again
    const sent = await traffic.stop();
    await waitForProgress(`${base}-group`, topic, (p) => p.committed === p.end);
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    expect((await a.exited).code).toBe(0);
    expect((await b.exited).code).toBe(0);
    expect(b.output()).toMatch(/partition restored/);
    if (process.env.SLUICE_TEST_DUMP)
      console.log(
        a
          .output()
          .split("\n")
          .filter((l) => /reset|fenced|restored|revoked/i.test(l))
          .join("\n"),
      );
    await verify(base, sent);
  }, 150_000);

  it("instances join and leave while traffic flows: no duplicate, no loss", async () => {
    const base = uniqueName("rebal");
    const topic = `${base}.requests`;
    await createTopics([{ topic, numPartitions: 4 }]);
    const a = start(base);
    await a.waitFor(/sluice serve running/);
    const traffic = startTraffic(topic);
    await waitForProgress(`${base}-group`, topic, (p) => p.committed > 200);
    const b = start(base); // join
    await b.waitFor(/partition restored/);
    await progressBy(`${base}-group`, topic, 300); // traffic flows through both
    a.child.kill("SIGTERM"); // graceful leave
    expect((await a.exited).code).toBe(0);
    const c = start(base); // another join
    await c.waitFor(/partition restored/);
    await progressBy(`${base}-group`, topic, 200);
    const sent = await traffic.stop();
    await waitForProgress(`${base}-group`, topic, (p) => p.committed === p.end);
    b.child.kill("SIGTERM");
    c.child.kill("SIGTERM");
    expect((await b.exited).code).toBe(0);
    expect((await c.exited).code).toBe(0);
    await verify(base, sent);
  }, 150_000);

  // The logging policy of docs/observability.md, held against real serve processes on a real broker:
  // joins, a crash and restart (the new owner fences the old producer, finds its transactions still
  // completing) and a graceful leave are normal operations, so they must not produce a single ERROR.
  it("logging policy across a join, a crash restart and a leave: no ERROR line, component once, dead letters at warn without payload, debug adds lines", async () => {
    const base = uniqueName("logs");
    const topic = `${base}.requests`;
    const group = `${base}-group`;
    await createTopics([{ topic, numPartitions: 4 }]);
    const start = (level: string) => {
      const p = startServe([], serveEnv(base, { ...modelEnv, SLUICE_OBSERVABILITY__LOG_LEVEL: level }));
      procs.push(p);
      return p;
    };

    const a = start("info");
    await a.waitFor(/sluice serve running/);
    const traffic = startTraffic(topic); // every 25th record is malformed JSON: a dead letter
    await waitForProgress(group, topic, (p) => p.committed > 150);
    const b = start("debug"); // join: a rebalance
    await b.waitFor(/partition restored/);
    await waitForProgress(group, topic, (p) => p.committed > 400);
    a.child.kill("SIGKILL"); // crash mid-stream: its open transactions are left to the broker
    await a.exited;
    const a2 = start("info"); // restart: fences the old producers, rebalances again
    await a2.waitFor(/partition restored/);
    await waitForProgress(group, topic, (p) => p.committed > 700);
    b.child.kill("SIGTERM"); // graceful leave: a2 takes everything over
    expect((await b.exited).code).toBe(0);
    const sent = await traffic.stop();
    await waitForProgress(group, topic, (p) => p.committed === p.end, 120_000);
    a2.child.kill("SIGTERM");
    expect((await a2.exited).code).toBe(0);

    const all = [a, b, a2].flatMap(jsonLines);
    const errors = all.filter(({ line }) => (line["level"] as number) >= 50).map(({ raw }) => raw);
    expect(errors).toEqual([]);

    // pino writes a child binding and a same-named field twice; the kafkajs mapping must not add one.
    const doubled = all.filter(({ raw }) => (raw.match(/"component":/g) ?? []).length > 1).map((l) => l.raw);
    expect(doubled).toEqual([]);
    for (const { line } of all) expect(line).toHaveProperty("hostname");

    // The rebalances got their Sluice-level summary lines.
    expect(all.filter(({ line }) => line["msg"] === "partitions assigned").length).toBeGreaterThanOrEqual(3);

    // Dead letters: one warn line each, with code, topic, partition, offset and a key hash; no payload.
    const deadLetterLines = all.filter(({ line }) => line["msg"] === "dead letter").map(({ line }) => line);
    expect(deadLetterLines.length).toBeGreaterThan(0);
    for (const line of deadLetterLines) {
      expect(line).toMatchObject({ level: 40, component: "dead-letters", code: "DECODE_FAILED", topic });
      expect(typeof line["partition"]).toBe("number");
      expect(line["offset"]).toMatch(/^\d+$/);
      expect(line["keyHash"]).toMatch(/^[0-9a-f]{16}$/);
    }
    const keysLogged = new Set(deadLetterLines.map((l) => l["keyHash"]));
    expect(keysLogged.size).toBeLessThanOrEqual(sent.malformedKeys.length);
    const text = all.map(({ raw }) => raw).join("\n");
    expect(text).not.toContain("{broken");
    for (const key of sent.malformedKeys) expect(text).not.toContain(`"${key}"`);

    // logLevel debug adds real lines: kafkajs's own narrative and the lifecycle detail.
    const debugOf = (p: ServeProcess) => jsonLines(p).filter(({ line }) => line["level"] === 20);
    expect(debugOf(b).some(({ line }) => line["component"] === "kafkajs")).toBe(true);
    expect(debugOf(b).some(({ line }) => line["msg"] === "transaction committed")).toBe(true);
    expect(debugOf(a2)).toEqual([]);
    // …including the expected transient events the policy moved off ERROR/WARN (b saw a2 join).
    const transient = debugOf(b)
      .map(({ line }) => line["transient"])
      .filter(Boolean);
    expect(transient).toContain("group rebalance");
  }, 240_000);
});
