import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { decodeResult } from "../../src/contracts/result-codec.js";
import { createTopics, uniqueName } from "../support/kafka-harness.js";
import {
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
    const results = await readCommitted(`${base}.results`, { expected: sent.validIds.size, settleMs: 1000 });
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
    const dead = await readCommitted(`${base}.dlq`, { expected: sent.malformedKeys.length, settleMs: 500 });
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
    a.child.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, 10_000));
    a.child.kill("SIGCONT"); // A wakes with stale state and open transactions
    await new Promise((r) => setTimeout(r, 5000));
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
    await new Promise((r) => setTimeout(r, 3000));
    a.child.kill("SIGTERM"); // graceful leave
    expect((await a.exited).code).toBe(0);
    const c = start(base); // another join
    await c.waitFor(/partition restored/);
    await new Promise((r) => setTimeout(r, 2000));
    const sent = await traffic.stop();
    await waitForProgress(`${base}-group`, topic, (p) => p.committed === p.end);
    b.child.kill("SIGTERM");
    c.child.kill("SIGTERM");
    expect((await b.exited).code).toBe(0);
    expect((await c.exited).code).toBe(0);
    await verify(base, sent);
  }, 150_000);
});
