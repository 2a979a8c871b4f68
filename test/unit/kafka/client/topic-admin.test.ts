import { describe, expect, it } from "vitest";
import { changelogTopicFor, MAX_TOPIC_NAME_CHARS } from "../../../../src/kafka/client/topic-admin.js";

describe("changelogTopicFor (group-scoped dedup changelog names)", () => {
  it("is <base>.<group>.<topic> when that is a valid Kafka topic name", () => {
    expect(changelogTopicFor("sluice.dedup-changelog", "sluice", "requests")).toBe(
      "sluice.dedup-changelog.sluice.requests",
    );
    expect(changelogTopicFor("b", "g1", "t")).not.toBe(changelogTopicFor("b", "g2", "t"));
  });

  it("sanitises characters Kafka forbids and adds a hash so distinct groups stay distinct", () => {
    const a = changelogTopicFor("base", "team/a b", "req");
    const b = changelogTopicFor("base", "team_a_b", "req");
    const c = changelogTopicFor("base", "team a/b", "req");
    expect(a).toMatch(/^base\.team_a_b\.req-[0-9a-f]{16}$/);
    expect(b).toBe("base.team_a_b.req"); // valid as is: unchanged
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it("cuts names over 249 characters and keeps them distinct and valid", () => {
    const long = "g".repeat(300);
    const x = changelogTopicFor("base", long, "requests");
    const y = changelogTopicFor("base", `${long}x`, "requests");
    for (const name of [x, y]) {
      expect(name.length).toBeLessThanOrEqual(MAX_TOPIC_NAME_CHARS);
      expect(name).toMatch(/^[a-zA-Z0-9._-]+$/);
    }
    expect(x).not.toBe(y);
  });
});
