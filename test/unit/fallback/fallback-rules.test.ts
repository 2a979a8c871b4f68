import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { FallbackPolicy, fallbackPolicyFor } from "../../../src/fallback/fallback-policy.js";
import { FallbackRules } from "../../../src/fallback/fallback-rules.js";

const dir = mkdtempSync(join(tmpdir(), "sluice-fallback-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const GOOD = `
rules:
  - name: threats
    keywords: [kill, "hurt you"]
    label: block
    scores: { block: 0.9, allow: 0.1 }
  - regex: "free\\\\s+money"
    label: review
    scores: { review: 0.7, allow: 0.3 }
default:
  label: allow
  scores: { allow: 0.8, block: 0.2 }
`;

const invalid = (message: RegExp) =>
  expect.objectContaining({ code: "CONFIG_INVALID", message: expect.stringMatching(message) });

describe("FallbackRules", () => {
  it("answers with the first matching rule, else the default (keywords are whole words, any case)", () => {
    const rules = FallbackRules.load(file("good.yaml", GOOD));
    expect(rules.size).toBe(2);
    expect(rules.answer("I will KILL it")).toEqual({
      output: { label: "block", scores: { block: 0.9, allow: 0.1 } },
      rule: "threats",
    });
    expect(rules.answer("they hurt you")).toMatchObject({ rule: "threats" });
    expect(rules.answer("skilled workers")).toMatchObject({ rule: "default", output: { label: "allow" } });
    expect(rules.answer("Free   money now")).toMatchObject({ rule: "#2", output: { label: "review" } });
    expect(rules.answer(42)).toMatchObject({ rule: "default" });
    expect(rules.labels().sort()).toEqual(["allow", "block", "review"]);
  });

  it("a malformed file stops with CONFIG_INVALID naming the file and the rule", () => {
    const missing = join(dir, "nope.yaml");
    expect(() => FallbackRules.load(missing)).toThrow(invalid(/nope\.yaml: cannot read it \(ENOENT\)/));
    const yaml = file("broken.yaml", "rules: [\n");
    expect(() => FallbackRules.load(yaml)).toThrow(invalid(/broken\.yaml: not valid YAML/));
    const both = file(
      "both.yaml",
      `rules:\n  - name: x\n    regex: a\n    keywords: [b]\n    label: l\n    scores: { l: 1 }\ndefault: { label: l, scores: { l: 1 } }\n`,
    );
    expect(() => FallbackRules.load(both)).toThrow(
      invalid(/both\.yaml: rules\[0\] \(x\): a rule needs exactly one of regex or keywords/),
    );
    const badRegex = file(
      "regex.yaml",
      `rules:\n  - name: paren\n    regex: "("\n    label: l\n    scores: { l: 1 }\ndefault: { label: l, scores: { l: 1 } }\n`,
    );
    expect(() => FallbackRules.load(badRegex)).toThrow(
      invalid(/regex\.yaml: rules\[0\] \(paren\): regex is not a valid/),
    );
    const score = file(
      "score.yaml",
      `rules:\n  - keywords: [a]\n    label: l\n    scores: { l: 2 }\ndefault: { label: l, scores: { l: 1 } }\n`,
    );
    expect(() => FallbackRules.load(score)).toThrow(invalid(/score\.yaml: rules\[0\]\.scores\.l: /));
    const label = file("label.yaml", `default: { label: yes, scores: { no: 1 } }\n`);
    expect(() => FallbackRules.load(label)).toThrow(
      invalid(/label\.yaml: default: scores must include the default's label/),
    );
    const noDefault = file("nodefault.yaml", "rules: []\n");
    expect(() => FallbackRules.load(noDefault)).toThrow(invalid(/nodefault\.yaml: default: /));
  });
});

describe("FallbackPolicy", () => {
  const policy = new FallbackPolicy({ rules: FallbackRules.parse(GOOD, "x.yaml"), maxOnlineQueue: 10 });
  it("overload at the bound; deadline when (ahead + 1) × ms per item passes it; nothing before measuring", () => {
    const facts = { onlineHeld: 3, ahead: 3, deadlineMs: 1100, nowMs: 1000, msPerItem: 20 };
    expect(policy.atIntake({ ...facts, onlineHeld: 10 })).toBe("overload");
    expect(policy.atIntake({ ...facts, onlineHeld: 10, nowMs: 1100 })).toBe("deadline"); // late wins
    expect(policy.atIntake(facts)).toBeUndefined(); // 1000 + 4 × 20 = 1080 ≤ 1100
    expect(policy.atIntake({ ...facts, ahead: 5 })).toBe("deadline"); // 1120 > 1100
    expect(policy.atIntake({ ...facts, ahead: 500, msPerItem: 0 })).toBeUndefined();
    expect(policy.atDispatch(1100, 1000, 4, 30)).toBe("deadline");
    expect(policy.atDispatch(1100, 1000, 4, 20)).toBeUndefined();
    expect(policy.atDispatch(999, 1000, 1, 0)).toBe("deadline"); // already expired
    expect(policy.afterModel("INFERENCE_FAILED")).toBe("model_error");
    expect(policy.afterModel("EMPTY_TEXT")).toBeUndefined();
  });

  it("no rules file: no policy; rules with a non-classification model: CONFIG_INVALID", () => {
    const load = () => FallbackRules.parse(GOOD, "x.yaml");
    expect(
      fallbackPolicyFor({ rulesPath: undefined, maxOnlineQueue: 1, modelTask: "embedding" }, load),
    ).toBeUndefined();
    expect(() =>
      fallbackPolicyFor({ rulesPath: "r.yaml", maxOnlineQueue: 1, modelTask: "embedding" }, load),
    ).toThrow(invalid(/fallback\.rulesPath is set \(r\.yaml\) but the model's task is embedding/));
    expect(
      fallbackPolicyFor({ rulesPath: "r.yaml", maxOnlineQueue: 1, modelTask: "classification" }, load),
    ).toBeInstanceOf(FallbackPolicy);
  });
});
