import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import type { GroupStatus } from "../../src/observability/group-status.js";
import { runCli } from "../support/cli-process.js";
import { createTopics, testBrokers, transactionalProducer, uniqueName } from "../support/kafka-harness.js";
import {
  killLeftovers,
  type MetricSample,
  metricsUrlOf,
  readCommitted,
  type ServeProcess,
  scrapeMetrics,
  serveEnv,
  startServe,
  waitForProgress,
} from "../support/serve-process.js";
import { createTinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

// A running `sluice serve` whose input came from a transactional producer (any Kafka Streams app, or
// one Sluice stage feeding another): once it is caught up, the lag gauges and time to drain read 0
// (the commit markers after each partition's last record are not lag), and `sluice status` agrees.
// The tiny generated model: this is about what the process reports, not about the model.
const PER_PARTITION = 5;

describe("sluice serve: lag at rest with transactional input", () => {
  const procs: ServeProcess[] = [];
  let dir: string | undefined;
  afterEach(() => killLeftovers(procs));
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("lag records, lag seconds and time to drain read 0 once caught up; sluice status too", async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-lag-rest-"));
    const modelEnv = tinyModelEnv(await createTinyModel(dir, { task: "embedding" }));
    const base = uniqueName("lag-rest");
    const topic = `${base}.requests`;
    const group = `${base}-group`;
    await createTopics([{ topic, numPartitions: 2 }]);
    const producer = transactionalProducer(uniqueName("lag-rest-upstream"));
    await producer.connect();
    for (const partition of [0, 1]) {
      const tx = await producer.transaction();
      await tx.send({
        topic,
        messages: Array.from({ length: PER_PARTITION }, (_, i) => {
          const id = `p${partition}-${i}`;
          return { partition, key: id, ...encodeRequest({ id, text: "hello world" }, "json") };
        }),
      });
      await tx.commit();
    }
    await producer.disconnect();

    const env = serveEnv(base, { ...modelEnv, SLUICE_OBSERVABILITY__LAG_INTERVAL_MS: "500" });
    const serve = startServe([], env);
    procs.push(serve);
    await serve.waitFor(/sluice serve running/, 60_000);
    // Every data record committed; each partition's end offset is one past it (the commit marker).
    const progress = await waitForProgress(group, topic, (p) => p.committed === 2 * PER_PARTITION, 30_000);
    expect(progress.end).toBe(2 * PER_PARTITION + 2);
    // Read once every input offset is committed: the results of those records are all there, and only
    // a record processed twice could add one.
    const results = await readCommitted(`${base}.results`, { expected: 2 * PER_PARTITION });
    expect(results).toHaveLength(2 * PER_PARTITION);

    const url = metricsUrlOf(serve);
    const lagOf = (m: MetricSample[]) =>
      m.filter((s) => s.name === "sluice_consumer_lag_records" || s.name === "sluice_time_to_drain_seconds");
    const atRest = (m: MetricSample[]) => {
      const l = lagOf(m);
      return (
        l.filter((s) => s.name === "sluice_consumer_lag_records").length === 2 &&
        l.every((s) => s.value === 0)
      );
    };
    // The samples after the commits are visible read 0 (two at most: the first may predate them).
    const deadline = Date.now() + 20_000;
    let m = await scrapeMetrics(url);
    while (!atRest(m) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 250));
      m = await scrapeMetrics(url);
    }
    expect(atRest(m), JSON.stringify(lagOf(m))).toBe(true);
    // …and stay 0 over the next samples while the topic is idle.
    await new Promise((r) => setTimeout(r, 1500));
    m = await scrapeMetrics(url);
    expect(atRest(m), JSON.stringify(lagOf(m))).toBe(true);
    const lagSeconds = m.filter((s) => s.name === "sluice_consumer_lag_seconds");
    expect(lagSeconds.map((s) => s.value)).toEqual([0, 0]);

    const status = await runCli(["status", "--group", group, "--topic", topic, "--json"], {
      KAFKA_BROKERS: testBrokers().join(","),
    });
    expect(status.code, status.stderr).toBe(0);
    const parsed = JSON.parse(status.stdout) as GroupStatus;
    expect(parsed.partitions.map((p) => [p.endOffset, p.lagRecords, p.lagSeconds])).toEqual([
      [String(PER_PARTITION + 1), 0, 0],
      [String(PER_PARTITION + 1), 0, 0],
    ]);

    serve.child.kill("SIGTERM");
    expect((await serve.exited).code).toBe(0);
  }, 120_000);
});
