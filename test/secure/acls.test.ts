import { afterEach, describe, expect, it } from "vitest";
import type { AclEntry } from "../../src/app/kafka-acl-plan.js";
import { encodeRequest } from "../../src/contracts/request-codec.js";
import { killLeftovers, type ServeProcess, startServe } from "../support/serve-process.js";
import {
  aclsFor,
  configEnv,
  createServeTopics,
  grant,
  produceAsAdmin,
  revoke,
  secrets,
  secureKafka,
  uniqueBase,
  writeConfig,
} from "./secure-harness.js";

// For each ACL `sluice acls` prints for serve (but the lag probe's, see below), serve without it
// exits non-zero within a bounded time with AUTHORIZATION_FAILED naming the refused operation and
// resource; it never hangs and never retries the refusal forever.
const BOUNDED_MS = 60_000;

const key = (e: AclEntry) =>
  `${e.operation} ${e.resourceType}${e.patternType === "PREFIXED" ? " prefix" : ""} ${e.name}`;

/** Which part of the plan each case drops, and what serve needs on the topics for it to matter. */
const CASES: {
  why: string;
  drop: (e: AclEntry, base: string) => boolean;
  /** Granted in place of the dropped one. */
  keep?: (base: string) => AclEntry[];
  changelogData?: boolean;
  expect: (base: string) => RegExp;
}[] = [
  {
    why: "READ on the request topic",
    drop: (e, b) => e.resourceType === "TOPIC" && e.name === `${b}.requests`,
    expect: (b) => new RegExp(`${b}\\.requests.*DESCRIBE|DESCRIBE.*${b}\\.requests`),
  },
  {
    why: "READ on the dedup changelog (at restore)",
    drop: (e) => e.resourceType === "TOPIC" && e.name.includes(".dedup.") && e.operation === "READ",
    changelogData: true,
    expect: (b) => new RegExp(`READ on TOPIC "${b}\\.dedup\\.`),
  },
  {
    why: "WRITE on the dedup changelog",
    drop: (e) => e.resourceType === "TOPIC" && e.name.includes(".dedup.") && e.operation === "WRITE",
    expect: (b) => new RegExp(`WRITE on TOPIC "${b}\\.dedup\\.[^"]*" to user`),
  },
  {
    why: "WRITE on the results",
    drop: (e, b) => e.name === `${b}.results`,
    // WRITE was the principal's only ACL there, so it cannot DESCRIBE the topic either: start-up says so.
    expect: (b) => new RegExp(`"${b}\\.results".*DESCRIBE`),
  },
  {
    why: "WRITE on the dead letters only",
    drop: (e, b) => e.name === `${b}.dlq`,
    expect: (b) => new RegExp(`"${b}\\.dlq".*DESCRIBE`),
  },
  {
    why: "WRITE on the dead letters, DESCRIBE kept (refused at the first dead letter)",
    drop: (e, b) => e.name === `${b}.dlq`,
    keep: (b) => [
      {
        resourceType: "TOPIC",
        patternType: "LITERAL",
        name: `${b}.dlq`,
        operation: "DESCRIBE",
        commands: [],
        why: "",
      },
    ],
    expect: (b) => new RegExp(`WRITE on TOPIC "${b}\\.dlq" to user`),
  },
  {
    why: "WRITE on the freshness topic",
    drop: (e, b) => e.name === `${b}.freshness`,
    expect: (b) => new RegExp(`"${b}\\.freshness".*DESCRIBE`),
  },
  {
    why: "READ on the group",
    drop: (e, b) => e.resourceType === "GROUP" && e.name === `${b}-group`,
    expect: (b) => new RegExp(`READ on GROUP "${b}-group"`),
  },
  {
    why: "WRITE on the transactional-id prefix sluice-<group>-",
    drop: (e) => e.resourceType === "TRANSACTIONAL_ID",
    expect: (b) => new RegExp(`WRITE on TRANSACTIONAL_ID prefix "sluice-${b}-group-"`),
  },
];

describe("serve without one of the ACLs sluice acls prints", () => {
  const procs: ServeProcess[] = [];
  afterEach(() => killLeftovers(procs));
  const principal = `User:${secureKafka().app.username}`;

  it("the plan is the measured minimum, every internal prefix included (no group for bounded reads)", async () => {
    const base = uniqueBase("acl-plan");
    const plan = (await aclsFor(writeConfig(base), ["--command", "serve"])).map(key).sort();
    expect(plan).toEqual(
      [
        `READ TOPIC ${base}.requests`,
        `READ TOPIC ${base}.dedup.${base}-group.${base}.requests`,
        `WRITE TOPIC ${base}.dedup.${base}-group.${base}.requests`,
        `WRITE TOPIC ${base}.results`,
        `WRITE TOPIC ${base}.dlq`,
        `WRITE TOPIC ${base}.freshness`,
        // The model control topic (docs/model-upgrades.md): serve runs without these until a promote.
        "READ TOPIC sluice.model-control",
        "WRITE TOPIC sluice.model-control",
        `READ GROUP ${base}-group`,
        `WRITE TRANSACTIONAL_ID prefix sluice-${base}-group-`,
      ].sort(),
    );
  });

  for (const c of CASES) {
    it(`without ${c.why}: AUTHORIZATION_FAILED naming it, bounded exit`, async () => {
      const base = uniqueBase("acl");
      const config = writeConfig(base);
      await createServeTopics(base);
      const plan = await aclsFor(config, ["--command", "serve"]);
      const dropped = plan.filter((e) => c.drop(e, base));
      expect(dropped.length, `case ${c.why} drops nothing`).toBe(1);
      // Prefixed group ACLs are shared by the whole run: take the dropped one away from everyone's grant.
      await revoke(dropped, principal);
      await grant([...plan.filter((e) => !c.drop(e, base)), ...(c.keep?.(base) ?? [])], principal);
      const requests = `${base}.requests`;
      await produceAsAdmin(requests, [
        ...Array.from({ length: 5 }, (_, i) => ({
          key: `id-${i}`,
          ...encodeRequest({ id: `id-${i}`, text: `t ${i}` }, "json"),
        })),
        { key: "bad", value: Buffer.from("{not json") },
      ]);
      if (c.changelogData)
        await produceAsAdmin(`${base}.dedup.${base}-group.${requests}`, [
          { key: "seen-before", value: Buffer.from("{}") },
        ]);
      const started = Date.now();
      const serve = startServe([], configEnv(config));
      procs.push(serve);
      const exit = await Promise.race([
        serve.exited,
        new Promise<"hung">((r) => setTimeout(() => r("hung"), BOUNDED_MS).unref()),
      ]);
      const output = serve.output();
      expect(exit, `serve did not exit within ${BOUNDED_MS} ms:\n${output.slice(-3000)}`).not.toBe("hung");
      expect((exit as { code: number | null }).code, output.slice(-3000)).toBe(1);
      // The CLI's one error line (stderr and the JSON log lines on stdout may interleave).
      const last = output.split("\n").find((l) => l.startsWith("AUTHORIZATION_FAILED: ")) ?? "";
      expect(last, output.slice(-3000)).toMatch(/^AUTHORIZATION_FAILED: Kafka denied /);
      expect(last).toMatch(c.expect(base));
      for (const secret of secrets()) expect(output).not.toContain(secret);
      // Bounded noise too: the refusal is not retried in a loop.
      expect(output.split("\n").length, output.slice(-3000)).toBeLessThan(150);
      console.log(`[acls] without ${c.why}: exit 1 after ${Date.now() - started} ms: ${last.slice(0, 200)}`);
      await grant(
        dropped.filter((e) => e.patternType === "PREFIXED"),
        principal,
      );
    });
  }
});
