import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { ModelBoundary } from "../../src/contracts/model-control.js";
import { isShadowed } from "../../src/delivery/shadow-agreement.js";
import { ModelControlStore } from "../../src/kafka/runs/model-control-store.js";
import { runCli } from "../support/cli-process.js";
import { createTopics, testKafka, uniqueName } from "../support/kafka-harness.js";
import {
  decodeResults,
  killLeftovers,
  readCommitted,
  type ServeProcess,
  serveEnv,
  startServe,
  startTraffic,
  waitForProgress,
} from "../support/serve-process.js";
import { createTinyCandidate, tinyCandidateEnv } from "../support/tiny-candidate.js";
import { createTinyModel, type TinyModel, tinyModelEnv } from "../support/tiny-onnx.js";

// The upgrade recipe end to end, with two `sluice serve` processes and a candidate that really
// differs (another tiny embedding model: other weights, other version): shadow results, a backfill
// with the candidate, promote --after-run under online load with one instance SIGKILLed and
// restarted meanwhile, rollback. Per partition one switch per decision, by offset; every id once.
describe("model upgrade: candidate, shadow, backfill, promote, rollback (two serve processes)", () => {
  const procs: ServeProcess[] = [];
  let dir: string;
  let serving: TinyModel;
  let candidate: TinyModel;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "sluice-upgrade-"));
    serving = await createTinyModel(join(dir, "serving"), { task: "embedding" });
    candidate = await createTinyCandidate(join(dir, "candidate"));
  });
  afterEach(() => killLeftovers(procs));
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("switches every partition once per decision, at a recorded offset, exactly once", async () => {
    const base = uniqueName("upgrade");
    const requests = `${base}.requests`;
    const group = `${base}-group`;
    const env = serveEnv(base, {
      ...tinyModelEnv(serving),
      ...tinyCandidateEnv(candidate, { SLUICE_CANDIDATE__SHADOW_SHARE: "0.2" }),
      SLUICE_MODEL__WORKERS: "1",
      SLUICE_TOPICS__BACKFILL: `${base}.backfill`,
      SLUICE_TOPICS__BACKFILL_RESULTS: `${base}.embeddings`,
      SLUICE_TOPICS__RUNS: `${base}.runs`,
      SLUICE_TOPICS__MODEL_CONTROL: `${base}.control`,
      SLUICE_TOPICS__SHADOW_RESULTS: `${base}.shadow`,
      SLUICE_TOPICS__PARTITIONS: "4",
      SLUICE_DELIVERY__DEFAULT_TIMEOUT_MS: "600000",
      SLUICE_MODEL__BACKFILL_WORKERS: "0",
      SLUICE_CANDIDATE__BACKFILL_WORKERS: "0",
    });
    await createTopics([{ topic: requests, numPartitions: 4 }]);
    const start = async (): Promise<ServeProcess> => {
      const p = startServe([], env);
      procs.push(p);
      await p.waitFor(/sluice serve running/, 90_000);
      return p;
    };
    const one = await start();
    expect(one.output()).toMatch(/"role":"serving"/);
    expect(one.output()).toMatch(/"role":"candidate"/);
    const two = await start();
    const traffic = startTraffic(requests, { perTick: 10, tickMs: 100 });

    // A backfill with the candidate, beside online traffic.
    const corpus = join(dir, "corpus.jsonl");
    const rows = 120;
    await writeFile(
      corpus,
      `${Array.from({ length: rows }, (_, i) => JSON.stringify({ id: `doc-${i}`, text: `a document about cats ${i}` })).join("\n")}\n`,
    );
    const submit = await runCli(
      ["backfill", "submit", "--model", "candidate", "--input", corpus, "--run-id", "corpus-v2"],
      env,
    );
    expect(submit.code, submit.stderr).toBe(0);
    const started = Date.now();
    for (;;) {
      const status = await runCli(["backfill", "status", "corpus-v2", "--json"], env);
      const report = JSON.parse(status.stdout || "{}") as { done?: boolean };
      if (report.done) break;
      if (Date.now() - started > 120_000)
        throw new Error(`backfill not done: ${status.stdout} ${status.stderr}`);
      await new Promise((r) => setTimeout(r, 1000));
    }

    // Promote under load; kill one instance while the switch happens, restart it.
    const promoting = runCli(
      ["model", "promote", "--after-run", "corpus-v2", "--timeout", "90000"],
      env,
      150_000,
    );
    await new Promise((r) => setTimeout(r, 300));
    two.child.kill("SIGKILL");
    await two.exited;
    const twoAgain = await start();
    const promoted = await promoting;
    expect(promoted.code, `${promoted.stdout}\n${promoted.stderr}`).toBe(0);
    expect(promoted.stdout).toMatch(/decision 1: .* answered by model version/);
    await new Promise((r) => setTimeout(r, 2000));
    const rollback = await runCli(["model", "rollback", "--timeout", "90000"], env, 150_000);
    expect(rollback.code, rollback.stderr).toBe(0);
    await new Promise((r) => setTimeout(r, 1000));
    const sent = await traffic.stop();
    const total = sent.validIds.size + sent.duplicates + sent.malformedKeys.length;
    await waitForProgress(group, requests, (p) => p.committed >= total, 120_000);

    const status = await runCli(["model", "status", "--json"], env);
    const s = JSON.parse(status.stdout) as {
      online: { version: string; source: string };
      candidate: { version: string };
      serving: { version: string };
      pending: number;
      decisions: { action: string }[];
    };
    expect(s.online).toEqual({ version: s.serving.version, source: "decision" });
    expect(s.decisions.map((d) => d.action)).toEqual(["promote", "rollback"]);
    expect(s.pending).toBe(0);
    const a = s.serving.version;
    const b = s.candidate.version;
    expect(a).not.toBe(b);

    for (const p of [one, twoAgain]) p.child.kill("SIGTERM");
    await Promise.all([one.exited, twoAgain.exited]);

    // Every valid id exactly once; each answered by the version its partition's boundaries say.
    const results = decodeResults(await readCommitted(`${base}.results`, { expected: sent.validIds.size }));
    const counts = new Map<string, number>();
    for (const r of results) counts.set(r.id, (counts.get(r.id) ?? 0) + 1);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    expect(counts.size).toBe(sent.validIds.size);
    const state = await new ModelControlStore({
      kafka: testKafka(),
      topic: `${base}.control`,
      replicationFactor: 1,
    }).read(group);
    for (let p = 0; p < 4; p++) {
      const list = state.boundaries.get(`${requests}:${p}`) as ModelBoundary[];
      expect(
        list.map((x) => x.seq),
        `partition ${p}`,
      ).toEqual([1, 2]);
      const versionAt = (offset: bigint) => {
        let v = a;
        for (const x of list) if (BigInt(x.offset) <= offset) v = x.version;
        return v;
      };
      for (const r of results.filter((x) => x.source.partition === p))
        expect(r.model.version, `${r.id} ${p}@${r.source.offset}`).toBe(versionAt(BigInt(r.source.offset)));
    }
    expect(new Set(results.map((r) => r.model.version))).toEqual(new Set([a, b]));
    // The backfill run: every row once, by the candidate.
    const embeddings = decodeResults(await readCommitted(`${base}.embeddings`, { expected: rows }));
    expect(new Set(embeddings.map((r) => r.id)).size).toBe(rows);
    expect(embeddings).toHaveLength(rows);
    expect(new Set(embeddings.map((r) => r.model.version))).toEqual(new Set([b]));
    // Shadow results: only picked ids, only the candidate (while it was not the online model), never twice.
    const shadows = decodeResults(await readCommitted(`${base}.shadow`, { expected: 1 }));
    expect(shadows.length).toBeGreaterThan(0);
    expect(shadows.every((r) => isShadowed(r.id, 0.2) && r.model.version === b)).toBe(true);
    expect(new Set(shadows.map((r) => r.id)).size).toBe(shadows.length);
    // Malformed records: one dead letter each.
    const dead = await readCommitted(`${base}.dlq`, { expected: sent.malformedKeys.length });
    expect(dead.map((d) => d.key).sort()).toEqual([...sent.malformedKeys].sort());
  }, 400_000);
});
