import { afterEach, describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { createTopics, produceMessages, uniqueName } from "../support/kafka-harness.js";
import {
  countResultIds,
  drainWithNewInstance,
  groupProgress,
  killLeftovers,
  readCommitted,
  type ServeProcess,
  serveEnv,
  startServe,
  waitForProgress,
} from "../support/serve-process.js";

// Bounded shutdown with the REAL default model (int8 BGE-small, ~120 items/s per core here): a
// backlog far larger than one shutdown budget, SIGTERM mid-stream. The first instance must exit 0
// within shutdown.timeoutMs, leaving what it fetched but had not started to the next owner; a second
// instance finishes; every id appears exactly once for a read_committed reader.
const UNIQUE = 1500;
const TIMEOUT_MS = 4000;

describe("sluice serve: bounded shutdown (shutdown.timeoutMs) on SIGTERM", () => {
  const procs: ServeProcess[] = [];
  afterEach(() => killLeftovers(procs));

  it("exits within the bound mid-backlog; the next owner finishes; exactly once", async () => {
    const base = uniqueName("shutdown");
    const topic = `${base}.requests`;
    const group = `${base}-group`;
    await createTopics([{ topic, numPartitions: 2 }]);
    const requests = Array.from({ length: UNIQUE }, (_, i) => ({ id: `id-${i}`, text: `bounded stop ${i}` }));
    await produceMessages(
      topic,
      requests.map((r) => ({ key: r.id, ...encodeRequest(r, "json") })),
      { chunkSize: 500 },
    );

    // maxQueuedRecords well above what the bound could drain: without the bound, stopping would
    // process all of it first (the old behaviour took 15 s for 5,000 records).
    const env = serveEnv(base, {
      SLUICE_SHUTDOWN__TIMEOUT_MS: String(TIMEOUT_MS),
      SLUICE_BATCHING__MAX_QUEUED_RECORDS: "1500",
    });
    const first = startServe([], env);
    procs.push(first);
    await first.waitFor(/sluice serve running/, 60_000);
    await waitForProgress(group, topic, (p) => p.committed >= 50, 90_000);
    const stoppedAt = Date.now();
    first.child.kill("SIGTERM");
    const exit = await first.exited;
    const stopMs = Date.now() - stoppedAt;
    expect(exit.code, first.output().slice(-3000)).toBe(0);
    expect(stopMs).toBeLessThan(TIMEOUT_MS + 1000);
    const atStop = await groupProgress(group, topic);
    expect(atStop.committed).toBeLessThan(UNIQUE); // really mid-backlog
    // It fetched more than it processed and left that to the next owner.
    const stopped = /"leftToNextOwner":(\d+)[^\n]*stream processor stopped/.exec(first.output());
    expect(stopped, first.output().slice(-3000)).not.toBeNull();
    expect(Number(stopped![1])).toBeGreaterThan(0);

    expect(await drainWithNewInstance(procs, env, group, topic)).toBe(0);
    const results = await readCommitted(`${base}.results`, { expected: UNIQUE });
    const counts = countResultIds(results);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(counts.size).toBe(UNIQUE);
    console.log(
      `[shutdown] SIGTERM after ${atStop.committed}/${UNIQUE} committed: exit 0 in ${stopMs} ms ` +
        `(bound ${TIMEOUT_MS} ms), ${stopped![1]} fetched records left to the next owner`,
    );
  }, 240_000);
});
