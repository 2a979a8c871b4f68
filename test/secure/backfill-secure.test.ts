import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../support/cli-process.js";
import {
  aclsFor,
  createTopicsAsAdmin,
  grant,
  readCommittedAsAdmin,
  revoke,
  secrets,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// `sluice backfill submit | status | export` as the application user: works with the ACLs `sluice acls
// --command backfill` prints; without the submitter's transactional-id prefix it stops at once with the
// named error and writes nothing.
describe("sluice backfill on the secured broker", () => {
  it("submit, status and export with the printed ACLs; without the transactional-id prefix, AUTHORIZATION_FAILED", async () => {
    const base = uniqueBase("secure-backfill");
    const topics = {
      requests: [`${base}.requests`],
      backfill: [`${base}.backfill`],
      runs: `${base}.runs`,
      results: `${base}.results`,
      deadLetters: `${base}.dlq`,
      dedupChangelog: `${base}.dedup`,
      freshness: `${base}.freshness`,
    };
    const config = writeConfig(base, {}, { topics });
    await createTopicsAsAdmin([
      { topic: `${base}.backfill`, numPartitions: 2 },
      { topic: `${base}.runs`, compact: true },
      { topic: `${base}.results`, numPartitions: 2 },
      { topic: `${base}.dlq`, numPartitions: 2 },
    ]);
    const plan = await aclsFor(config, ["--command", "backfill"]);
    const principal = `User:${secureKafka().app.username}`;
    const transactional = plan.filter((e) => e.resourceType === "TRANSACTIONAL_ID");
    expect(transactional.map((e) => e.name)).toEqual(["sluice-backfill-submit-"]);
    await revoke(transactional, principal);
    await grant(
      plan.filter((e) => e.resourceType !== "TRANSACTIONAL_ID"),
      principal,
    );
    const dir = mkdtempSync(join(tmpdir(), "sluice-secure-backfill-"));
    const input = join(dir, "rows.jsonl");
    writeFileSync(
      input,
      Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: `r-${i}`, text: `row ${i}` })).join("\n"),
    );
    const submit = ["backfill", "submit", "--config", config.path, "--input", input, "--run-id", "run-1"];

    const refused = await runCli(submit, {}, 90_000);
    expect(refused.code, `${refused.stdout}\n${refused.stderr}`).toBe(1);
    expect(refused.stderr).toMatch(
      /^AUTHORIZATION_FAILED: Kafka denied WRITE on TRANSACTIONAL_ID prefix "sluice-backfill-submit-"/m,
    );

    await grant(transactional, principal);
    const ok = await runCli(submit, {}, 90_000);
    expect(ok.code, `${ok.stdout}\n${ok.stderr}`).toBe(0);
    const rows = await readCommittedAsAdmin(`${base}.backfill`, { expected: 20 });
    expect(rows.length).toBe(20);

    // Nothing serves the lane here, so the run is submitted but not done: status and export read the
    // runs topic, the backfill topic, results and dead letters with the printed ACLs alone.
    const status = await runCli(
      ["backfill", "status", "run-1", "--json", "--config", config.path],
      {},
      60_000,
    );
    expect(status.code, status.stderr).toBe(0);
    const summary = JSON.parse(status.stdout) as { rowsTotal: number; rowsDone: number; done: boolean };
    expect(summary).toMatchObject({ rowsTotal: 20, rowsDone: 0, done: false });
    const exported = await runCli(
      ["backfill", "export", "run-1", "--output", join(dir, "out"), "--config", config.path],
      {},
      60_000,
    );
    expect(exported.code, exported.stderr).toBe(2); // incomplete: says which ids have no result yet
    expect(`${exported.stdout}${exported.stderr}`).toMatch(/incomplete: 20 submitted ids have no result yet/);
    for (const out of [refused, ok, status, exported])
      for (const secret of secrets()) {
        expect(out.stdout).not.toContain(secret);
        expect(out.stderr).not.toContain(secret);
      }
  });
});
