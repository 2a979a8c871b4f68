import { describe, expect, it } from "vitest";
import {
  MAX_SEND_BYTES,
  type RefusableUnit,
  retrySizeRefusals,
  SendBound,
} from "../../../src/delivery/size-refusal.js";
import { SluiceError } from "../../../src/sluice-error.js";

const refused = (records: number, recordIndex: number) =>
  new SluiceError("PUBLISH_TOO_LARGE", "refused (fake)", {
    retriable: records > 1,
    context: { topic: "t", records, recordIndex },
  });

describe("SendBound", () => {
  it("starts at the configured bound, at most MAX_SEND_BYTES and at least 1", () => {
    expect(new SendBound(100_000).bytes).toBe(100_000);
    expect(new SendBound(10 * MAX_SEND_BYTES).bytes).toBe(MAX_SEND_BYTES);
    expect(new SendBound(0).bytes).toBe(1);
  });

  it("halves after a refused send of several records, never below 1; a record refused alone changes nothing", () => {
    const bound = new SendBound(1000);
    bound.refused(1);
    expect(bound.bytes).toBe(1000);
    bound.refused(2);
    expect(bound.bytes).toBe(500);
    bound.refused(7);
    expect(bound.bytes).toBe(250);
    for (let i = 0; i < 20; i++) bound.refused(3);
    expect(bound.bytes).toBe(1);
  });
});

/** A unit of one-record parts whose writer refuses what `refuse` says, logging every attempt. */
function unitOf(
  parts: string[],
  refuse: (parts: readonly string[], attempt: number) => SluiceError | undefined,
  onRefused: RefusableUnit<string, string>["onRefused"] = () => undefined,
) {
  const attempts: string[][] = [];
  const asked: [string, number][] = [];
  const unit: RefusableUnit<string, string> = {
    parts,
    recordsOf: () => 1,
    write: async (current) => {
      attempts.push([...current]);
      const error = refuse(current, attempts.length);
      if (error) throw error;
      return current.join(",");
    },
    onRefused: (part, index, failure) => {
      asked.push([part, index]);
      return onRefused(part, index, failure);
    },
  };
  return { unit, attempts, asked };
}

describe("retrySizeRefusals", () => {
  it("returns the accepted attempt's result; a refused send of several records retries the unit whole", async () => {
    const { unit, attempts, asked } = unitOf(["a", "b", "c"], (_, n) => (n < 3 ? refused(3, 0) : undefined));
    await expect(retrySizeRefusals(unit)).resolves.toBe("a,b,c");
    expect(attempts).toEqual([
      ["a", "b", "c"],
      ["a", "b", "c"],
      ["a", "b", "c"],
    ]);
    expect(asked).toEqual([]);
  });

  it("leaves out a record refused alone (the hook gets its index as given, also after earlier ones left)", async () => {
    const refuse = (current: readonly string[]) => {
      const big = current.findIndex((p) => p.startsWith("big"));
      return big >= 0 ? refused(1, big) : undefined;
    };
    const { unit, attempts, asked } = unitOf(["a", "big1", "b", "big2", "c"], refuse);
    await expect(retrySizeRefusals(unit)).resolves.toBe("a,b,c");
    expect(asked).toEqual([
      ["big1", 1],
      ["big2", 3],
    ]);
    expect(attempts.at(-1)).toEqual(["a", "b", "c"]);
  });

  it("writes a replacement in the refused record's place, once; a replacement refused again is thrown", async () => {
    const replaced = unitOf(
      ["a", "big", "c"],
      (current) => (current.includes("big") ? refused(1, current.indexOf("big")) : undefined),
      (part) => `${part}-dead-letter`,
    );
    await expect(retrySizeRefusals(replaced.unit)).resolves.toBe("a,big-dead-letter,c");
    expect(replaced.asked).toEqual([["big", 1]]);

    const again = refused(1, 1);
    const refusedTwice = unitOf(
      ["a", "big", "c"],
      () => again,
      (part) => `${part}-dead-letter`,
    );
    await expect(retrySizeRefusals(refusedTwice.unit)).rejects.toBe(again);
    expect(refusedTwice.asked).toEqual([["big", 1]]);
    expect(refusedTwice.attempts).toEqual([
      ["a", "big", "c"],
      ["a", "big-dead-letter", "c"],
    ]);
  });

  it("maps the refused record to the part holding it by the parts' record counts", async () => {
    const asked: number[] = [];
    const sizes = [2, 0, 3, 1];
    let first = true;
    const result = await retrySizeRefusals<number, string>({
      parts: [0, 1, 2, 3],
      recordsOf: (part) => sizes[part % 10] as number,
      write: async (parts) => {
        if (first) {
          first = false;
          throw refused(1, 4); // records 0-1: part 0, 2-4: part 2, 5: part 3
        }
        return parts.join(",");
      },
      onRefused: (part, index) => {
        asked.push(index);
        return part + 10;
      },
    });
    expect(asked).toEqual([2]);
    expect(result).toBe("0,1,12,3");
  });

  it("throws a refused record that is in no part (a closing record, bookkeeping) and the hook's own throw", async () => {
    const beyond = refused(1, 3);
    const none = unitOf(["a", "b", "c"], () => beyond);
    await expect(retrySizeRefusals(none.unit)).rejects.toBe(beyond);
    expect(none.asked).toEqual([]);

    const hookThrows = unitOf(
      ["a"],
      () => refused(1, 0),
      (_, __, failure) => {
        throw failure;
      },
    );
    await expect(retrySizeRefusals(hookThrows.unit)).rejects.toMatchObject({ code: "PUBLISH_TOO_LARGE" });
    expect(hookThrows.attempts).toHaveLength(1);
  });

  it("throws every other failure unchanged, after one attempt", async () => {
    for (const error of [
      new SluiceError("PRODUCER_FENCED", "fenced (fake)"),
      new SluiceError("TRANSACTION_FAILED", "timeout (fake)", { retriable: true }),
      new Error("MESSAGE_TOO_LARGE (not classified)"),
      // A size refusal that names no send, or one outside any send (records 0): no retry can help.
      new SluiceError("PUBLISH_TOO_LARGE", "no send named (fake)"),
      refused(0, 0),
    ]) {
      const { unit, attempts, asked } = unitOf(["a", "b"], () => error as SluiceError);
      await expect(retrySizeRefusals(unit)).rejects.toBe(error);
      expect(attempts).toHaveLength(1);
      expect(asked).toEqual([]);
    }
  });

  it("gives up on a writer that keeps reporting refused sends of several records (a bound that does not halve)", async () => {
    const failure = refused(2, 0);
    const { unit, attempts } = unitOf(["a", "b"], () => failure);
    await expect(retrySizeRefusals(unit)).rejects.toBe(failure);
    // From MAX_SEND_BYTES halving reaches 1 within log2(MAX_SEND_BYTES) refusals.
    expect(attempts.length).toBeGreaterThan(Math.log2(MAX_SEND_BYTES));
    expect(attempts.length).toBeLessThan(30);
  });
});
