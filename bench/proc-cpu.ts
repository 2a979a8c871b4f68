import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { parseMachineStat } from "../src/model/idle-cpu-meter.js";

/**
 * CPU readings from Linux's /proc for the benchmarks that put processes side by side (bench:ceiling,
 * bench:slo): a process's CPU ticks, the machine's busy ticks and runnable threads, the pid behind a
 * listening port (the broker), and a sampler that reads them back at any instant.
 */

/** Clock ticks per second of /proc's counters. */
export const CLK_TCK = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** utime + stime of a process in clock ticks, or undefined once it has gone. */
export function procTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after "(comm)": state is field 3, utime 14, stime 15.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(f[11]) + Number(f[12]);
  } catch {
    return undefined;
  }
}

/** Busy ticks of the whole machine (all but idle and iowait), from /proc/stat (src/model/idle-cpu-meter.ts's rule). */
export function machineBusy(): number {
  const stat = parseMachineStat(readFileSync("/proc/stat", "utf8"));
  return stat === undefined ? 0 : (stat.busyMs * CLK_TCK) / 1000;
}

/**
 * The pid of the process listening on `port` on this machine (the broker, when it runs here), found
 * through /proc/net/tcp and the processes' socket descriptors; undefined when none is visible.
 */
export function listenerPid(port: number): number | undefined {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text = "";
    try {
      text = readFileSync(table, "utf8");
    } catch {
      continue;
    }
    for (const row of text.split("\n").slice(1)) {
      const f = row.trim().split(/\s+/);
      // local address, state 0A = LISTEN, inode
      if (f[1]?.endsWith(hex) && f[3] === "0A" && f[9]) inodes.add(f[9]);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (socket && inodes.has(socket[1] as string)) return Number(pid);
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/** Threads runnable on the machine right now (`procs_running` of /proc/stat: the run queue). */
export function procsRunning(): number {
  const m = /^procs_running (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"));
  return m ? Number(m[1]) : Number.NaN;
}

/**
 * The kernel's CPU pressure so far (`/proc/pressure/cpu`, "some" total): µs during which at least one
 * runnable thread waited for a CPU; NaN where the kernel has no PSI.
 */
export function cpuPressureUs(): number {
  try {
    const m = /^some .*total=(\d+)/m.exec(readFileSync("/proc/pressure/cpu", "utf8"));
    return m ? Number(m[1]) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** CPU ticks of the named processes and the machine's busy ticks at one instant. */
export interface CpuSample {
  at: number;
  ticks: Record<string, number>;
}

/** /proc samples of some processes every 50 ms; read back at any instant by interpolation. */
export class CpuSampler {
  readonly samples: CpuSample[] = [];
  private readonly timer: NodeJS.Timeout;
  constructor(
    private readonly pids: Record<string, number | undefined>,
    everyMs = 50,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }
  sample(): void {
    const ticks: Record<string, number> = {
      machine: machineBusy(),
      running: procsRunning(),
      pressureUs: cpuPressureUs(),
    };
    for (const [name, pid] of Object.entries(this.pids)) {
      const t = pid === undefined ? undefined : procTicks(pid);
      // A process that has gone keeps its last reading.
      ticks[name] = t ?? this.samples[this.samples.length - 1]?.ticks[name] ?? Number.NaN;
    }
    this.samples.push({ at: Date.now(), ticks });
  }
  stop(): void {
    clearInterval(this.timer);
  }
  /** CPU-seconds of `name` at epoch ms `at`, interpolated between the samples around it. */
  at(name: string, at: number): number {
    const s = this.samples;
    const after = s.findIndex((x) => x.at >= at);
    const pick = (x: CpuSample | undefined) => (x?.ticks[name] ?? Number.NaN) / CLK_TCK;
    if (after <= 0) return pick(after === 0 ? s[0] : s[s.length - 1]);
    const a = s[after - 1] as CpuSample;
    const b = s[after] as CpuSample;
    const w = (at - a.at) / Math.max(1, b.at - a.at);
    return pick(a) + (pick(b) - pick(a)) * w;
  }
  /** CPU-seconds of `name` between two instants. */
  between(name: string, from: number, to: number): number {
    return this.at(name, to) - this.at(name, from);
  }
}
