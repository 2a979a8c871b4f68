import { describe, expect, it } from "vitest";
import { IdleCpuMeter, parseCgroupUsageMs, parseMachineStat } from "../../../src/model/idle-cpu-meter.js";

/** /proc/stat of a 2-CPU machine with `busy` ticks of user time so far. */
const procStat = (busyTicks: number, idleTicks = 1000) =>
  [
    `cpu  ${busyTicks} 0 0 ${idleTicks} 0 0 0 0 0 0`,
    "cpu0 1 0 0 1 0 0 0 0 0 0",
    "cpu1 1 0 0 1 0 0 0 0 0 0",
    "intr 12345",
    "procs_running 3",
  ].join("\n");

describe("IdleCpuMeter: idle CPU of the machine or of the container's quota", () => {
  it("parses /proc/stat: busy time counts user, nice, system, irq, softirq and steal; the CPUs are its cpuN lines", () => {
    expect(parseMachineStat("cpu  100 20 30 5000 70 1 2 3 100 0\ncpu0 x\ncpu1 y\ncpu2 z\n")).toEqual({
      busyMs: ((100 + 20 + 30 + 1 + 2 + 3) * 1000) / 100,
      cpus: 3,
    });
    expect(parseMachineStat("not a stat file")).toBeUndefined();
  });

  it("without a quota: the machine's CPUs less its busy time over the wall time between two readings", () => {
    const files = new Map([["/proc/stat", procStat(0)]]);
    let now = 0;
    const meter = new IdleCpuMeter(
      { cores: 2 },
      (p) => files.get(p),
      () => now,
    );
    expect(meter.capacityCores).toBe(2);
    expect(meter.source).toBe("/proc/stat");
    expect(meter.idleCores()).toBeUndefined(); // the first reading only starts the count
    // 250 ms later, 37.5 ticks = 375 ms of CPU were busy: 1.5 cores, 0.5 idle.
    now = 250;
    files.set("/proc/stat", procStat(37.5));
    expect(meter.idleCores()).toBeCloseTo(0.5, 6);
    // Busier than the machine (rounding of ticks): never below 0.
    now = 500;
    files.set("/proc/stat", procStat(100));
    expect(meter.idleCores()).toBe(0);
  });

  it("under a cgroup v2 quota: the quota less the cgroup's own usage (cpu.stat beside cpu.max)", () => {
    const files = new Map([["/sys/fs/cgroup/pod/cpu.stat", "usage_usec 1000000\nuser_usec 900000\n"]]);
    let now = 0;
    const meter = new IdleCpuMeter(
      { cores: 1, quotaCpus: 1.5, source: "/sys/fs/cgroup/pod/cpu.max" },
      (p) => files.get(p),
      () => now,
    );
    expect(meter.capacityCores).toBe(1.5);
    expect(meter.source).toBe("/sys/fs/cgroup/pod/cpu.stat");
    meter.idleCores();
    now = 1000;
    files.set("/sys/fs/cgroup/pod/cpu.stat", "usage_usec 2000000\n"); // 1 s of CPU in 1 s
    expect(meter.idleCores()).toBeCloseTo(0.5, 6);
  });

  it("cgroup v1: cpuacct.usage (ns) beside cpu.cfs_quota_us; unreadable counters give no reading", () => {
    expect(parseCgroupUsageMs("/x/cpuacct.usage", "2500000\n")).toBe(2.5);
    expect(parseCgroupUsageMs("/x/cpu.stat", "user_usec 1\n")).toBeUndefined();
    const meter = new IdleCpuMeter(
      { cores: 1, quotaCpus: 1, source: "/c/cpu.cfs_quota_us" },
      () => undefined,
    );
    expect(meter.source).toBe("/c/cpuacct.usage");
    expect(meter.idleCores()).toBeUndefined();
    expect(meter.idleCores()).toBeUndefined();
  });

  it("reads this machine", () => {
    const meter = new IdleCpuMeter();
    expect(meter.capacityCores).toBeGreaterThan(0);
    meter.idleCores();
    const until = Date.now() + 30;
    while (Date.now() < until) {
      // busy for 30 ms, so some CPU time passes
    }
    const idle = meter.idleCores();
    if (process.platform === "linux") {
      expect(idle).toBeGreaterThanOrEqual(0);
      expect(idle).toBeLessThanOrEqual(meter.capacityCores);
    }
  });
});
