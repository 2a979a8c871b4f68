import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, startCli } from "../support/cli-process.js";
import {
  createTopics,
  produceMessages,
  testBrokers,
  testKafka,
  uniqueName,
} from "../support/kafka-harness.js";
import { readCommitted } from "../support/serve-process.js";

// `sluice backfill` against the real broker (no serve needed): bad input stops with a clear error
// naming the key, flag or file, a refused submit adds nothing to the topic, and a SIGKILLed submit
// resumes from its last committed transaction without doubling a row.
describe("sluice backfill CLI against the real broker", () => {
  let dir: string;
  let base: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-backfill-cli-"));
    base = uniqueName("bfcli");
    await createTopics([{ topic: `${base}.backfill`, numPartitions: 2 }]);
    env = {
      KAFKA_BROKERS: testBrokers().join(","),
      SLUICE_TOPICS__REQUESTS: `${base}.requests`,
      SLUICE_TOPICS__BACKFILL: `${base}.backfill`,
      SLUICE_TOPICS__RUNS: `${base}.runs`,
      SLUICE_TOPICS__RESULTS: `${base}.results`,
    };
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function backfillEnd(): Promise<number> {
    const admin = testKafka().admin();
    await admin.connect();
    try {
      return (await admin.fetchTopicOffsets(`${base}.backfill`)).reduce((n, p) => n + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  }

  it("an unknown run id is RUN_NOT_FOUND for status and export", async () => {
    const status = await runCli(["backfill", "status", "no-such-run"], env);
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(
      /RUN_NOT_FOUND: no backfill run "no-such-run" in .*\.runs \(topics\.runs\)/,
    );
    const exported = await runCli(["backfill", "export", "no-such-run", "--output", join(dir, "x")], env);
    expect(exported.code).toBe(1);
    expect(exported.stderr).toMatch(/RUN_NOT_FOUND/);
  });

  it("submit needs topics.backfill, a valid --run-id and a readable input", async () => {
    const input = join(dir, "ok.jsonl");
    await writeFile(input, `${JSON.stringify({ id: "a", text: "x" })}\n`);
    const noLane = await runCli(["backfill", "submit", "--input", input, "--run-id", "r1"], {
      ...env,
      SLUICE_TOPICS__BACKFILL: "",
    });
    expect(noLane.code).toBe(1);
    expect(noLane.stderr).toMatch(/CONFIG_INVALID: topics\.backfill is empty/);
    const badId = await runCli(["backfill", "submit", "--input", input, "--run-id", "a b"], env);
    expect(badId.code).toBe(1);
    expect(badId.stderr).toMatch(/CONFIG_INVALID: --run-id "a b" is not valid/);
    const missing = await runCli(
      ["backfill", "submit", "--input", join(dir, "nope.jsonl"), "--run-id", "r1"],
      env,
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/INPUT_INVALID: cannot read input file .*nope\.jsonl/);
    const clash = await runCli(["backfill", "status", "r1"], {
      ...env,
      SLUICE_TOPICS__RUNS: `${base}.requests`,
    });
    expect(clash.code).toBe(1);
    expect(clash.stderr).toMatch(/topics\.runs.*must differ from every topic in topics\.requests/);
  });

  it("resubmitting is idempotent, and a changed input stops with MANIFEST_MISMATCH naming the file", async () => {
    const input = join(dir, "corpus.jsonl");
    const rows = Array.from({ length: 30 }, (_, i) => JSON.stringify({ id: `c${i}`, text: `row ${i}` }));
    await writeFile(input, `${rows.join("\n")}\n`);
    const runId = `run-${base}`;
    const first = await runCli(
      ["backfill", "submit", "--input", input, "--run-id", runId, "--chunk-rows", "7"],
      env,
    );
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/30 rows on .*\.backfill, 0 invalid/);
    expect(await backfillEnd()).toBeGreaterThanOrEqual(30);
    const end = await backfillEnd();

    const again = await runCli(["backfill", "submit", "--input", input, "--run-id", runId], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/already submitted; nothing to do/);
    expect(await backfillEnd()).toBe(end);

    await writeFile(input, `${rows.slice(1).join("\n")}\n`);
    const changed = await runCli(["backfill", "submit", "--input", input, "--run-id", runId], env);
    expect(changed.code).toBe(1);
    expect(changed.stderr).toContain(`MANIFEST_MISMATCH: input file ${input} changed since run ${runId}`);
    expect(await backfillEnd()).toBe(end);

    const status = await runCli(["backfill", "status", runId, "--json"], env);
    expect(JSON.parse(status.stdout)).toMatchObject({
      runId,
      rowsTotal: 30,
      rowsSubmitted: 30,
      rowsDone: 0,
      done: false,
    });
  });

  it("a submit SIGKILLed mid-run resumes where its last transaction committed: every row exactly once", async () => {
    const runId = `crash-${base}`;
    const input = join(dir, "big.jsonl");
    const rows = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ id: `k${i}`, text: `row ${i}` }));
    await writeFile(input, `${rows.join("\n")}\n`);
    const crashEnv = { ...env, SLUICE_TOPICS__BACKFILL: `${base}.crash` };
    await createTopics([{ topic: `${base}.crash`, numPartitions: 3 }]);
    const first = startCli(
      ["backfill", "submit", "--input", input, "--run-id", runId, "--chunk-rows", "5"],
      crashEnv,
    );
    let progress = "";
    first.child.stderr.on("data", (d: Buffer) => {
      progress += d.toString();
    });
    // Kill once a few hundred rows are committed, with transactions still to come.
    let handled = 0;
    for (const started = Date.now(); handled < 300; ) {
      if (Date.now() - started > 60_000) throw new Error("submit made no progress");
      await new Promise((r) => setTimeout(r, 20));
      handled = Math.max(0, ...[...progress.matchAll(/(\d+) rows handled/g)].map((m) => Number(m[1])));
    }
    first.child.kill("SIGKILL");
    await first.done;
    expect(handled).toBeLessThan(3000);

    const resumed = await runCli(["backfill", "submit", "--input", input, "--run-id", runId], crashEnv);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/resumed after row \d+/);
    const records = await readCommitted(`${base}.crash`, { expected: 3000 });
    const counts = new Map<string, number>();
    for (const r of records) counts.set(r.key ?? "", (counts.get(r.key ?? "") ?? 0) + 1);
    expect([...counts].filter(([, n]) => n !== 1)).toEqual([]);
    expect(counts.size).toBe(3000);
    const status = await runCli(["backfill", "status", runId, "--json"], crashEnv);
    expect(JSON.parse(status.stdout)).toMatchObject({
      rowsTotal: 3000,
      rowsSubmitted: 3000,
      submitStatus: "submitted",
    });
  });

  it("submits a topic range (kafka:TOPIC --range) like batch mode reads it", async () => {
    const topic = `${base}.source`;
    await createTopics([{ topic, numPartitions: 1 }]);
    await produceMessages(
      topic,
      Array.from({ length: 20 }, (_, i) => ({
        key: `s${i}`,
        value: JSON.stringify({ id: `s${i}`, text: `t ${i}` }),
      })),
    );
    const runId = `range-${base}`;
    const r = await runCli(
      ["backfill", "submit", "--input", `kafka:${topic}`, "--range", "0:5-0:15", "--run-id", runId],
      env,
    );
    expect(r.code, r.stderr).toBe(0);
    const status = await runCli(["backfill", "status", runId, "--json"], env);
    expect(JSON.parse(status.stdout)).toMatchObject({
      rowsTotal: 10,
      rowsSubmitted: 10,
      input: `kafka:${topic}`,
    });
  });
});
