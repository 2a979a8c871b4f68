import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { runCli } from "../support/cli-process.js";
import {
  aclsFor,
  createTopicsAsAdmin,
  grant,
  produceAsAdmin,
  readCommittedAsAdmin,
  revoke,
  secrets,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// `sluice batch` from a topic to a topic as the application user: works with the ACLs `sluice acls
// --command batch` prints; without the transactional-id prefix it stops at once with the named error.
describe("sluice batch on the secured broker", () => {
  it("topic to topic with the printed ACLs; without the transactional-id prefix, AUTHORIZATION_FAILED", async () => {
    const base = uniqueBase("secure-batch");
    const config = writeConfig(base);
    const input = `${base}.in`;
    const output = `${base}.out`;
    await createTopicsAsAdmin([{ topic: input }, { topic: output }]);
    await produceAsAdmin(
      input,
      Array.from({ length: 12 }, (_, i) => ({
        key: `b-${i}`,
        ...encodeRequest({ id: `b-${i}`, text: `batch ${i}` }, "json"),
      })),
    );
    const plan = await aclsFor(config, [
      "--command",
      "batch",
      "--batch-input",
      input,
      "--batch-output",
      output,
    ]);
    const principal = `User:${secureKafka().app.username}`;
    const transactional = plan.filter((e) => e.resourceType === "TRANSACTIONAL_ID");
    await revoke(transactional, principal);
    await grant(
      plan.filter((e) => e.resourceType !== "TRANSACTIONAL_ID"),
      principal,
    );
    const args = (state: string) => [
      "batch",
      "--config",
      config.path,
      "-i",
      `kafka:${input}`,
      "-o",
      `kafka:${output}`,
      "--state-dir",
      state,
    ];

    const refused = await runCli(args(mkdtempSync(join(tmpdir(), "sluice-secure-batch-"))), {}, 90_000);
    expect(refused.code, `${refused.stdout}\n${refused.stderr}`).toBe(1);
    expect(refused.stderr).toMatch(
      /^AUTHORIZATION_FAILED: Kafka denied WRITE on TRANSACTIONAL_ID prefix "sluice-batch-"/m,
    );

    await grant(transactional, principal);
    const ok = await runCli(args(mkdtempSync(join(tmpdir(), "sluice-secure-batch-"))), {}, 90_000);
    expect(ok.code, ok.stderr).toBe(0);
    const rows = await readCommittedAsAdmin(output, { expected: 12 });
    expect(rows.length).toBe(12);
    for (const text of [refused.stdout, refused.stderr, ok.stdout, ok.stderr])
      for (const secret of secrets()) expect(text).not.toContain(secret);
  });
});
