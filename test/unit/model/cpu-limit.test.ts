import { describe, expect, it } from "vitest";
import { cpuLimit, type FileReader } from "../../../src/model/cpu-limit.js";
import { resolveWorkerCount } from "../../../src/model/worker-count.js";

const files =
  (map: Record<string, string>): FileReader =>
  (path) =>
    map[path];

describe("cpuLimit: the cores a container really has (cgroup quota vs affinity)", () => {
  it("cgroup v2: quota ÷ period, rounded down, never above the affinity mask", () => {
    const read = files({ "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/cpu.max": "200000 100000\n" });
    expect(cpuLimit(read, 32)).toEqual({ cores: 2, quotaCpus: 2, source: "/sys/fs/cgroup/cpu.max" });
    expect(cpuLimit(read, 1).cores).toBe(1);
    const fractional = files({ "/proc/self/cgroup": "0::/", "/sys/fs/cgroup/cpu.max": "150000 100000" });
    expect(cpuLimit(fractional, 8)).toMatchObject({ cores: 1, quotaCpus: 1.5 });
    const tiny = files({ "/proc/self/cgroup": "0::/", "/sys/fs/cgroup/cpu.max": "20000 100000" });
    expect(cpuLimit(tiny, 8).cores).toBe(1);
  });

  it("cgroup v2: `max` means no quota; the tightest of the process's cgroup and its parents wins", () => {
    const unlimited = files({ "/proc/self/cgroup": "0::/", "/sys/fs/cgroup/cpu.max": "max 100000" });
    expect(cpuLimit(unlimited, 8)).toEqual({ cores: 8 });
    const nested = files({
      "/proc/self/cgroup": "0::/kubepods.slice/pod1/ctr\n",
      "/sys/fs/cgroup/kubepods.slice/pod1/ctr/cpu.max": "max 100000",
      "/sys/fs/cgroup/kubepods.slice/pod1/cpu.max": "300000 100000",
      "/sys/fs/cgroup/kubepods.slice/cpu.max": "1600000 100000",
    });
    expect(cpuLimit(nested, 32)).toEqual({
      cores: 3,
      quotaCpus: 3,
      source: "/sys/fs/cgroup/kubepods.slice/pod1/cpu.max",
    });
  });

  it("cgroup v1: cfs_quota_us ÷ cfs_period_us, −1 = no quota, in either cpu mount", () => {
    const v1 = files({
      "/proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "400000\n",
      "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    });
    expect(cpuLimit(v1, 16)).toMatchObject({ cores: 4, quotaCpus: 4 });
    const none = files({
      "/proc/self/cgroup": "1:cpu:/\n",
      "/sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1",
      "/sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000",
    });
    expect(cpuLimit(none, 2)).toEqual({ cores: 2 });
  });

  it("missing or unreadable files: the affinity mask alone", () => {
    expect(cpuLimit(files({}), 6)).toEqual({ cores: 6 });
    expect(cpuLimit(files({ "/proc/self/cgroup": "0::/" }), 6)).toEqual({ cores: 6 });
    const garbage = files({ "/proc/self/cgroup": "0::/", "/sys/fs/cgroup/cpu.max": "lots 0" });
    expect(cpuLimit(garbage, 6)).toEqual({ cores: 6 });
    // Only the mount roots, when /proc/self/cgroup itself is missing.
    expect(cpuLimit(files({ "/sys/fs/cgroup/cpu.max": "100000 100000" }), 6).cores).toBe(1);
  });

  it("model.workers auto on a 32-core node with a 2-CPU limit starts 1 worker, not 31", () => {
    const read = files({ "/proc/self/cgroup": "0::/", "/sys/fs/cgroup/cpu.max": "200000 100000" });
    expect(resolveWorkerCount("auto", cpuLimit(read, 32).cores)).toBe(1);
    expect(resolveWorkerCount("auto", 32)).toBe(31);
  });
});
