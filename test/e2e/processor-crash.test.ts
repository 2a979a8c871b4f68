import { afterEach, describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { createTopics, produceMessages, uniqueName } from "../support/kafka-harness.js";
import {
  decodeResults,
  killLeftovers,
  readCommitted,
  resultIds,
  type ServeProcess,
  serveEnv,
  startServe,
  waitForProgress,
} from "../support/serve-process.js";

// Crash invariant with the REAL default model (int8 BGE-small; `models/` is filled on first use).
// SIGKILL leaves open transactions behind; the restarted instance fences them, reads the committed
// offsets and the dedup changelog, and continues: every valid unique id appears exactly once in the
// results and every malformed record exactly once in the dead letters (read_committed readers).
const UNIQUE = 3000;
const DUPLICATES = 450;
const MALFORMED = 90;

describe("sluice serve survives SIGKILL without loss or duplicates", () => {
  const procs: ServeProcess[] = [];
  afterEach(() => killLeftovers(procs));

  it("crash mid-stream, restart: exactly once", async () => {
    const base = uniqueName("crash");
    const topic = `${base}.requests`;
    const group = `${base}-group`;
    await createTopics([{ topic, numPartitions: 3 }]);
    const messages: { key: string; value: Buffer; headers?: Record<string, string> }[] = [];
    const phrases = [
      "kafka streams",
      "exactly once",
      "micro batching",
      "onnx runtime",
      "deadline",
      "embedding",
    ];
    for (let i = 0; i < UNIQUE; i++) {
      const text = `${phrases[i % phrases.length]} ${i}`;
      messages.push({
        key: `id-${i}`,
        ...encodeRequest({ id: `id-${i}`, text }, i % 3 === 0 ? "avro" : "json"),
      });
      // Interleave duplicates (same id ⇒ same key ⇒ same partition) and malformed records.
      if (i % 7 === 3 && messages.length < UNIQUE + DUPLICATES + MALFORMED) {
        const dup = i - 3;
        messages.push({ key: `id-${dup}`, ...encodeRequest({ id: `id-${dup}`, text: "again" }, "json") });
      }
      if (i % 33 === 5) messages.push({ key: `bad-${i}`, value: Buffer.from(`{"id": "bad-${i}", "text": `) });
    }
    const dupCount = messages.filter((m) => m.key.startsWith("id-")).length - UNIQUE;
    const badCount = messages.filter((m) => m.key.startsWith("bad-")).length;
    expect(dupCount).toBeGreaterThan(300);
    expect(badCount).toBeGreaterThan(80);
    await produceMessages(topic, messages, { chunkSize: 500 });
    const total = messages.length;

    // Deadlines are not what this test is about: on a slow machine (2 cores, the real model) the
    // backlog can outlive the 30 s default deadline and answer some requests `expired`.
    const env = serveEnv(base, {
      SLUICE_DELIVERY__COMMIT_INTERVAL_MS: "100",
      SLUICE_DELIVERY__DEFAULT_TIMEOUT_MS: "600000",
    });
    const first = startServe([], env);
    procs.push(first);
    await first.waitFor(/sluice serve running/, 60_000);
    // Kill somewhere in the middle: some transactions committed, others open.
    const atKill = await waitForProgress(group, topic, (p) => p.committed >= total * 0.3, 90_000);
    first.child.kill("SIGKILL");
    expect(atKill.committed).toBeLessThan(total); // really mid-stream
    const killed = await first.exited;
    expect(killed.signal).toBe("SIGKILL");

    const second = startServe([], env);
    procs.push(second);
    await second.waitFor(/sluice serve running/, 60_000);
    const metricsUrl = /"metricsUrl":"([^"]+)"/.exec(second.output())?.[1];
    await waitForProgress(group, topic, (p) => p.committed === p.end, 90_000);
    const ready = await fetch(`${metricsUrl}/readyz`);
    expect(ready.status).toBe(200);
    second.child.kill("SIGTERM");
    expect((await second.exited).code).toBe(0);

    const results = await readCommitted(`${base}.results`, { expected: UNIQUE });
    const ids = resultIds(results);
    const counts = new Map<string, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const doubled = [...counts].filter(([, n]) => n > 1);
    expect(doubled).toEqual([]);
    expect(counts.size).toBe(UNIQUE);
    const statuses = new Set(decodeResults(results).map((r) => r.status));
    expect(statuses).toEqual(new Set(["ok"]));

    const dead = await readCommitted(`${base}.dlq`, { expected: badCount });
    expect(dead.map((d) => d.key).sort()).toEqual(
      messages
        .filter((m) => m.key.startsWith("bad-"))
        .map((m) => m.key)
        .sort(),
    );
  }, 240_000);
});
