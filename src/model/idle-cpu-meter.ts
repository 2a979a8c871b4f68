import { availableParallelism } from "node:os";
import { dirname } from "node:path";
import { type CpuLimit, cpuLimit, type FileReader, readText } from "./cpu-limit.js";
import { CLOCK_TICKS_PER_SECOND } from "./thread-cpu-clock.js";

/** Where the meter reads busy CPU time, and the capacity it is counted against. */
interface CpuSource {
  /** The CPU this domain may use, cores: the cgroup quota, or the machine's CPUs. */
  capacityCores: number;
  /** Busy CPU time of the domain so far, ms; undefined when it cannot be read. */
  busyMs(): number | undefined;
  /** Which counters are read: `/proc/stat`, or the cgroup usage file. */
  source: string;
}

/**
 * The idle CPU of the domain this process runs in, in cores, between one reading and the next
 * (docs/lanes.md, "Headroom"):
 * - under a cgroup CPU quota (a container's `limits.cpu`): the quota less the cgroup's own usage
 *   (cgroup v2 `cpu.stat` usage_usec beside the `cpu.max` that set the quota; v1 `cpuacct.usage`
 *   beside `cpu.cfs_quota_us`), so sidecars in the same pod count and other pods do not;
 * - without a quota: the machine's (`/proc/stat`: every CPU's time less busy time; steal counts as
 *   busy, the CPU was not there to use), so a broker or another instance on the same machine counts.
 * Idle time is what a thread that wakes up gets at once; a domain with none left makes every
 * wake-up wait for a time slice.
 */
export class IdleCpuMeter {
  private readonly cpu: CpuSource;
  private last: { atMs: number; busyMs: number } | undefined;

  constructor(
    limit: CpuLimit = cpuLimit(),
    read: FileReader = readText,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.cpu = cpuSource(limit, read);
  }

  /** The CPU the idle time is counted against, cores. */
  get capacityCores(): number {
    return this.cpu.capacityCores;
  }

  /** What is read: `/proc/stat` or the cgroup's usage file. */
  get source(): string {
    return this.cpu.source;
  }

  /**
   * Idle cores since the previous call (capacity − busy CPU ÷ wall time, at least 0); undefined on the
   * first call, when no time passed, or when the counters cannot be read.
   */
  idleCores(): number | undefined {
    const busyMs = this.cpu.busyMs();
    const atMs = this.now();
    const last = this.last;
    if (busyMs === undefined) {
      this.last = undefined;
      return undefined;
    }
    this.last = { atMs, busyMs };
    if (last === undefined || atMs <= last.atMs) return undefined;
    const busyCores = Math.max(0, busyMs - last.busyMs) / (atMs - last.atMs);
    return Math.max(0, this.cpu.capacityCores - busyCores);
  }
}

/**
 * The first line of /proc/stat ("cpu user nice system idle iowait irq softirq steal guest
 * guest_nice", in clock ticks) as busy ms (user + nice + system + irq + softirq + steal: guest time
 * is already in user), and the number of CPUs (its `cpuN` lines). Pure.
 */
export function parseMachineStat(text: string): { busyMs: number; cpus: number } | undefined {
  const lines = text.split("\n");
  const total = lines[0]?.trim().split(/\s+/);
  if (total?.[0] !== "cpu") return undefined;
  const [user, nice, system, , , irq, softirq, steal] = total.slice(1).map(Number);
  const busy = [user, nice, system, irq, softirq, steal].reduce<number>((sum, v) => sum + (v ?? 0), 0);
  const cpus = lines.filter((l) => /^cpu\d+\s/.test(l)).length;
  if (!Number.isFinite(busy) || cpus === 0) return undefined;
  return { busyMs: (busy * 1000) / CLOCK_TICKS_PER_SECOND, cpus };
}

/** A cgroup's own CPU usage, ms: v2 `cpu.stat` (usage_usec) or v1 `cpuacct.usage` (ns). Pure. */
export function parseCgroupUsageMs(file: string, text: string): number | undefined {
  if (file.endsWith("cpu.stat")) {
    const usec = /^usage_usec\s+(\d+)/m.exec(text)?.[1];
    return usec === undefined ? undefined : Number(usec) / 1000;
  }
  const ns = Number(text.trim());
  return text.trim() !== "" && Number.isFinite(ns) ? ns / 1e6 : undefined;
}

function cpuSource(limit: CpuLimit, read: FileReader): CpuSource {
  if (limit.quotaCpus !== undefined && limit.source !== undefined) {
    const dir = dirname(limit.source);
    const file = limit.source.endsWith("cpu.max") ? `${dir}/cpu.stat` : `${dir}/cpuacct.usage`;
    return {
      capacityCores: Math.min(limit.quotaCpus, availableParallelism()),
      busyMs: () => {
        const text = read(file);
        return text === undefined ? undefined : parseCgroupUsageMs(file, text);
      },
      source: file,
    };
  }
  const first = parseMachineStat(read("/proc/stat") ?? "");
  return {
    capacityCores: first?.cpus ?? availableParallelism(),
    busyMs: () => parseMachineStat(read("/proc/stat") ?? "")?.busyMs,
    source: "/proc/stat",
  };
}
