import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createTopics, uniqueName } from "../support/kafka-harness.js";
import {
  killLeftovers,
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

// The logging policy of docs/observability.md, held against real serve processes on a real broker:
// joins, a crash and restart (the new owner fences the old producer, finds its transactions still
// completing) and a graceful leave are normal operations, so they must not produce a single ERROR.
describe("logging policy across a rebalance and a restart", () => {
  let dir: string;
  let modelEnv: Record<string, string>;
  const procs: ServeProcess[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-logs-"));
    modelEnv = tinyModelEnv(await createTinyModel(dir, { task: "embedding" }));
  });
  afterEach(() => killLeftovers(procs));
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("no ERROR line; kafkajs lines carry component once; dead letters at warn without payload; debug adds lines", async () => {
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
    const transient = debugOf(b).map(({ line }) => line["transient"]).filter(Boolean);
    expect(transient).toContain("group rebalance");
  }, 240_000);
});
