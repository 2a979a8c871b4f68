import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  CLOCK_TICKS_PER_SECOND,
  parseProcStat,
  parseSchedstatMs,
  statCpuMs,
  ThreadCpuClock,
} from "../../../src/model/thread-cpu-clock.js";

// Real lines from this machine (a node worker thread and `cat`), and one whose comm holds ") (".
const WORKER_LINE =
  "30525 (sluice-infer-1) S 30478 30478 27378 0 -1 4194368 1203 0 0 0 1834 97 0 0 20 0 13 0 925694 1133440000 36211 18446744073709551615 1 1 0 0 0 0 0 4096 134234626 0 0 0 -1 1 0 0 0 0 0";
const CAT_LINE =
  "30480 (cat) R 30478 30478 27378 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 925694 3133440 362 18446744073709551615 93887431065600 93887431085481 140720495934128 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
const ODD_COMM_LINE = "42 (a) (b c) R 1 1 1 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0 1 1 1";

describe("the /proc per-thread CPU parser", () => {
  it("reads utime (field 14) and stime (field 15) in clock ticks, and the thread's name", () => {
    expect(parseProcStat(WORKER_LINE)).toEqual({
      tid: 30525,
      comm: "sluice-infer-1",
      utimeTicks: 1834,
      stimeTicks: 97,
    });
    expect(statCpuMs(parseProcStat(WORKER_LINE))).toBe(19_310);
    expect(parseProcStat(CAT_LINE)).toMatchObject({ comm: "cat", utimeTicks: 0, stimeTicks: 0 });
  });

  it("counts fields from the last ')' so a name with spaces and parentheses does not shift them", () => {
    expect(parseProcStat(ODD_COMM_LINE)).toEqual({
      tid: 42,
      comm: "a) (b c",
      utimeTicks: 250,
      stimeTicks: 50,
    });
    expect(statCpuMs(parseProcStat(ODD_COMM_LINE), 1000)).toBe(300);
  });

  it("refuses a line that is not a stat line", () => {
    expect(() => parseProcStat("hello")).toThrow(/not a \/proc stat line/);
    expect(() => parseProcStat("1 (x) R 1 2")).toThrow(/no utime\/stime/);
  });

  it("reads schedstat's run time in nanoseconds as ms", () => {
    expect(parseSchedstatMs("219892 780764 2\n")).toBeCloseTo(0.219892, 9);
    expect(() => parseSchedstatMs("x y z")).toThrow(/not a schedstat line/);
  });

  it.runIf(process.platform === "linux")(
    "on Linux the clock follows this thread's CPU, as the kernel's stat counters do",
    () => {
      const clock = ThreadCpuClock.start({ intraOpThreads: 1, workerId: 0 });
      expect(["proc-schedstat", "proc-stat"]).toContain(clock.source);
      const stat = () => statCpuMs(parseProcStat(readFileSync("/proc/thread-self/stat", "utf8")));
      const [c0, s0] = [clock.nowMs(), stat()];
      let x = 0;
      // Spin until the kernel counted 100 ms of this thread's CPU (not for a wall time: on a busy
      // machine the loop gets only a share of a core).
      const until = performance.now() + 30_000;
      while (stat() - s0 < 100 && performance.now() < until)
        for (let i = 0; i < 100_000; i++) x += Math.sqrt(x + 1);
      const [c1, s1] = [clock.nowMs(), stat()];
      expect(x).toBeGreaterThan(0);
      // Ticks are 1000 / CLOCK_TICKS_PER_SECOND ms; a shared machine may deschedule the loop.
      const tickMs = 1000 / CLOCK_TICKS_PER_SECOND;
      expect(c1 - c0).toBeGreaterThan(50);
      expect(Math.abs(c1 - c0 - (s1 - s0))).toBeLessThanOrEqual(2 * tickMs + 5);
    },
  );
});
