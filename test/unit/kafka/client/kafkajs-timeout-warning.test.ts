import { afterEach, describe, expect, it, vi } from "vitest";
import { ignoreKafkajsNegativeTimeoutWarning } from "../../../../src/kafka/client/kafkajs-timeout-warning.js";

describe("ignoreKafkajsNegativeTimeoutWarning (kafkajs#1751 on Node 24)", () => {
  const original = process.emitWarning;
  afterEach(() => {
    process.emitWarning = original;
  });

  it("drops TimeoutNegativeWarning in each calling form and passes every other warning on", () => {
    const seen = vi.fn();
    process.emitWarning = seen as unknown as typeof process.emitWarning;
    ignoreKafkajsNegativeTimeoutWarning();
    ignoreKafkajsNegativeTimeoutWarning(); // idempotent: wrapped once
    process.emitWarning("-5 is a negative number.", "TimeoutNegativeWarning");
    process.emitWarning("-5 is a negative number.", { type: "TimeoutNegativeWarning" });
    const error = new Error("-5 is a negative number.");
    error.name = "TimeoutNegativeWarning";
    process.emitWarning(error);
    expect(seen).not.toHaveBeenCalled();
    process.emitWarning("old API", "DeprecationWarning", "DEP0001");
    process.emitWarning("plain");
    expect(seen).toHaveBeenCalledTimes(2);
    expect(seen.mock.calls[0]).toEqual(["old API", "DeprecationWarning", "DEP0001"]);
  });
});
