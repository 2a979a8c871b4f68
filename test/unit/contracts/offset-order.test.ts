import { describe, expect, it } from "vitest";
import { offsetOrder, offsetText, orderAfter } from "../../../src/contracts/offset-order.js";

describe("offset order values", () => {
  it("are numbers below 2^53 and bigints from there on, ordered exactly across the two", () => {
    const offsets = [
      "0",
      "1",
      "41",
      "9007199254740990",
      "9007199254740991",
      "9007199254740992",
      "9007199254740993",
      "18446744073709551",
    ];
    const orders = offsets.map(offsetOrder);
    expect(orders.map((o) => typeof o)).toEqual([...Array(5).fill("number"), ...Array(3).fill("bigint")]);
    for (let i = 0; i < orders.length; i++) {
      for (let j = 0; j < orders.length; j++) {
        const [a, b] = [orders[i] as number | bigint, orders[j] as number | bigint];
        expect(a < b, `${offsets[i]} < ${offsets[j]}`).toBe(i < j);
        expect(a <= b).toBe(i <= j);
        expect(a > b).toBe(i > j);
      }
    }
    expect(orders.map(offsetText)).toEqual(offsets);
  });

  it("the next offset stays exact where numbers end", () => {
    expect(offsetText(orderAfter(offsetOrder("41")))).toBe("42");
    expect(offsetText(orderAfter(offsetOrder("9007199254740990")))).toBe("9007199254740991");
    expect(offsetText(orderAfter(offsetOrder("9007199254740991")))).toBe("9007199254740992");
    expect(offsetText(orderAfter(offsetOrder("9007199254740992")))).toBe("9007199254740993");
  });
});
