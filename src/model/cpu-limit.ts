import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";

/** Reads a file's text, or undefined when it does not exist or cannot be read (a seam for tests). */
export type FileReader = (path: string) => string | undefined;

/** Reads a file's text, or undefined when it does not exist or cannot be read. */
export const readText: FileReader = (path) => {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
};

/** Where a CPU limit came from, for the start-up log and `sluice plan`. */
export interface CpuLimit {
  /** CPUs this process may use: the smaller of the affinity mask and the cgroup quota, at least 1. */
  cores: number;
  /** The cgroup quota in CPUs (quota ÷ period, may be fractional); undefined when there is none. */
  quotaCpus?: number;
  /** The file the quota was read from. */
  source?: string;
}

/**
 * The cores the container really has. `os.availableParallelism()` honours the affinity mask, not a
 * CFS quota: under Kubernetes `limits.cpu: 2` on a 32-core node it returns 32 (docs/design.md §3). This
 * reads the quota of the process's own cgroup and of every parent (the tightest wins):
 * - cgroup v2: `cpu.max` = `<quota> <period>` or `max <period>` (no limit);
 * - cgroup v1: `cpu.cfs_quota_us` (−1 = no limit) and `cpu.cfs_period_us`, in the cpu controller's
 *   hierarchy (`/sys/fs/cgroup/cpu,cpuacct`, `/sys/fs/cgroup/cpu`).
 * The process's cgroup path comes from `/proc/self/cgroup`; inside a container with its own cgroup
 * namespace that path is `/` and the quota sits at the mount's root, which is read too. A quota of
 * 1.5 CPUs counts as 1 core (rounded down, at least 1): starting a worker for half a core only adds
 * throttling.
 */
export function cpuLimit(read: FileReader = readText, affinityCores = availableParallelism()): CpuLimit {
  const quota = cgroupQuota(read);
  if (quota === undefined) return { cores: Math.max(1, affinityCores) };
  return {
    cores: Math.max(1, Math.min(affinityCores, Math.floor(quota.cpus))),
    quotaCpus: quota.cpus,
    source: quota.source,
  };
}

function cgroupQuota(read: FileReader): { cpus: number; source: string } | undefined {
  const membership = read("/proc/self/cgroup") ?? "";
  let best: { cpus: number; source: string } | undefined;
  const consider = (q: { cpus: number; source: string } | undefined) => {
    if (q !== undefined && (best === undefined || q.cpus < best.cpus)) best = q;
  };
  for (const line of membership.split("\n")) {
    // hierarchy-id:controllers:path; v2 is "0::/path".
    const match = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!match) continue;
    const [, id, controllers = "", path = "/"] = match;
    if (id === "0" && controllers === "") {
      // Unified hierarchy; on hybrid hosts it is mounted at /sys/fs/cgroup/unified.
      for (const root of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"])
        for (const dir of ancestors(root, path)) consider(v2Quota(read, dir));
    } else if (controllers.split(",").includes("cpu")) {
      for (const root of ["/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"])
        for (const dir of ancestors(root, path)) consider(v1Quota(read, dir));
    }
  }
  // No /proc/self/cgroup (or no matching line): the mount roots alone.
  if (membership === "") {
    consider(v2Quota(read, "/sys/fs/cgroup"));
    consider(v1Quota(read, "/sys/fs/cgroup/cpu,cpuacct"));
    consider(v1Quota(read, "/sys/fs/cgroup/cpu"));
  }
  return best;
}

/** `root/a/b`, `root/a`, `root` for path `/a/b`. */
function ancestors(root: string, path: string): string[] {
  const parts = path.split("/").filter((p) => p !== "");
  const dirs: string[] = [];
  for (let n = parts.length; n >= 0; n--) dirs.push([root, ...parts.slice(0, n)].join("/"));
  return dirs;
}

function v2Quota(read: FileReader, dir: string): { cpus: number; source: string } | undefined {
  const source = `${dir}/cpu.max`;
  const text = read(source)?.trim();
  if (!text) return undefined;
  const [quota, period] = text.split(/\s+/);
  return ratio(quota, period, source);
}

function v1Quota(read: FileReader, dir: string): { cpus: number; source: string } | undefined {
  const source = `${dir}/cpu.cfs_quota_us`;
  const quota = read(source)?.trim();
  if (!quota) return undefined;
  return ratio(quota, read(`${dir}/cpu.cfs_period_us`)?.trim(), source);
}

function ratio(
  quota: string | undefined,
  period: string | undefined,
  source: string,
): { cpus: number; source: string } | undefined {
  if (quota === undefined || quota === "max" || quota === "-1") return undefined;
  const q = Number(quota);
  const p = Number(period ?? "100000");
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return { cpus: q / p, source };
}
