import { describe, expect, it } from "vitest";
import { CsvReader, parseCsv } from "../../../src/runs/csv-reader.js";
import { isSluiceError } from "../../../src/sluice-error.js";

describe("CsvReader (RFC 4180)", () => {
  it("reads plain records with CRLF and LF endings", () => {
    expect(parseCsv("id,text\r\n1,hello\n2,world")).toEqual([
      ["id", "text"],
      ["1", "hello"],
      ["2", "world"],
    ]);
  });

  it("keeps empty fields and skips blank lines", () => {
    expect(parseCsv("a,,c\n\n,\n")).toEqual([
      ["a", "", "c"],
      ["", ""],
    ]);
  });

  it("reads quoted fields with commas, doubled quotes and line breaks", () => {
    expect(parseCsv('1,"a, b"\n2,"say ""hi"""\n3,"line1\r\nline2"\n4,""\n')).toEqual([
      ["1", "a, b"],
      ["2", 'say "hi"'],
      ["3", "line1\r\nline2"],
      ["4", ""],
    ]);
  });

  it("gives the same records whatever the chunk boundaries", () => {
    const text = 'id,text\r\n1,"a ""quoted"", multi\nline"\r\n2,plain\r\n3,"x"\r\n';
    const whole = parseCsv(text);
    for (let size = 1; size <= 7; size++) {
      const reader = new CsvReader();
      const records: string[][] = [];
      for (let i = 0; i < text.length; i += size) records.push(...reader.push(text.slice(i, i + size)));
      records.push(...reader.end());
      expect(records).toEqual(whole);
    }
    expect(whole).toHaveLength(4);
  });

  it.each([
    ['1,ab"c\n', /quote inside an unquoted field/],
    ['1,"abc"x\n', /text after a closing quote/],
    ['1,"abc\n', /ends inside a quoted field/],
  ])("rejects malformed input %j with INPUT_INVALID", (text, message) => {
    try {
      parseCsv(text);
      expect.unreachable();
    } catch (err) {
      expect(isSluiceError(err, "INPUT_INVALID")).toBe(true);
      expect((err as Error).message).toMatch(message);
    }
  });
});
