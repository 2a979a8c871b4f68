import { describe, expect, it } from "vitest";
import { ACL_COMMANDS, type AclEntry, aclPlan } from "../../../src/app/kafka-acl-plan.js";
import { defaultConfig } from "../../../src/config/config-schema.js";

const brief = (entries: AclEntry[]) =>
  entries.map((e) => `${e.operation} ${e.resourceType}${e.patternType === "PREFIXED" ? "*" : ""} ${e.name}`);

describe("aclPlan", () => {
  it("knows serve, status, batch, backfill and model", () => {
    expect(ACL_COMMANDS).toEqual(["serve", "status", "batch", "backfill", "model"]);
  });

  it("serve with a backfill lane reads the backfill topic and its changelog, and writes backfillResults", () => {
    const config = defaultConfig();
    config.topics.backfill = ["corpus.backfill"];
    config.topics.backfillResults = "corpus.embeddings";
    const serve = brief(aclPlan(config, ["serve"], { createTopics: false }));
    expect(serve).toEqual(
      expect.arrayContaining([
        "READ TOPIC sluice.requests",
        "READ TOPIC corpus.backfill",
        "READ TOPIC sluice.dedup-changelog.sluice.corpus.backfill",
        "WRITE TOPIC sluice.dedup-changelog.sluice.corpus.backfill",
        "WRITE TOPIC corpus.embeddings",
        // The live page's runs table (observability.ui, on by default).
        "READ TOPIC sluice.runs",
      ]),
    );
    config.observability.ui = false;
    const noPage = brief(aclPlan(config, ["serve"], { createTopics: false }));
    // Without the page, serve only writes the runs' cost shares there.
    expect(noPage.filter((line) => line.includes("runs"))).toEqual(["WRITE TOPIC sluice.runs"]);
    // Without a backfill lane, none of it.
    const plain = brief(aclPlan(defaultConfig(), ["serve"], { createTopics: false }));
    expect(plain.some((line) => line.includes("backfill") || line.includes("embeddings"))).toBe(false);
  });

  it("backfill needs its topic, the runs topic, the results and dead letters, and its submitter prefix", () => {
    const config = defaultConfig();
    config.topics.backfill = ["corpus.backfill"];
    const plan = brief(aclPlan(config, ["backfill"], { createTopics: true }));
    expect(plan).toEqual([
      "WRITE TOPIC corpus.backfill",
      "READ TOPIC corpus.backfill",
      "WRITE TOPIC sluice.runs",
      "READ TOPIC sluice.runs",
      "READ TOPIC sluice.results",
      "READ TOPIC sluice.dead-letters",
      "WRITE TRANSACTIONAL_ID* sluice-backfill-submit-",
      "CREATE TOPIC sluice.runs",
    ]);
  });
});
