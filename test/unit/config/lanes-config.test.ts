import { describe, expect, it } from "vitest";
import { loadConfig } from "../../../src/config/config-loader.js";
import type { SluiceConfigInput } from "../../../src/config/config-schema.js";

const invalid = (message: string) => expect.objectContaining({ code: "CONFIG_INVALID", message });
const load = (topics: SluiceConfigInput["topics"]) => () => loadConfig({ env: {}, overrides: { topics } });

describe("topics.backfill", () => {
  it("defaults to no backfill lane and takes a list (file, env)", () => {
    expect(loadConfig({ env: {} }).topics.backfill).toEqual([]);
    expect(loadConfig({ env: { SLUICE_TOPICS__BACKFILL: "bf.a,bf.b" } }).topics.backfill).toEqual([
      "bf.a",
      "bf.b",
    ]);
  });

  it("a backfill topic that is also a request topic is CONFIG_INVALID naming topics.backfill", () => {
    expect(load({ requests: ["q"], backfill: ["bf", "q"] })).toThrow(
      invalid(expect.stringMatching(/topics\.backfill = \["bf","q"\].*"q" is also in topics\.requests/)),
    );
  });

  it("a backfill topic that is also an output topic is CONFIG_INVALID naming both keys", () => {
    expect(load({ backfill: ["sluice.results"] })).toThrow(
      invalid(expect.stringMatching(/topics\.backfill = .*"sluice\.results" is also topics\.results/)),
    );
  });
});
