import { readdirSync, readFileSync, writeFileSync } from "node:fs";

/**
 * CPU time of one inference worker: the worker thread itself plus the onnxruntime intra-op pool
 * threads its session started (with `model.intraOpThreads` > 1 ORT runs parts of each call there,
 * where the calling thread's own counters do not see it). Node 20 has no per-thread CPU API
 * (docs/design.md §3), so on Linux it reads the kernel's per-thread counters under /proc; Node ≥ 23.9's
 * `process.threadCpuUsage()` covers the calling thread only, so it is used only when there is no
 * pool to add. Elsewhere the clock estimates wall time × intra-op threads and says so (`source`).
 */
export type ThreadCpuSource = "proc-schedstat" | "proc-stat" | "thread-cpu-usage" | "wall-estimate";

/** Linux USER_HZ: the unit of /proc/<pid>/stat utime/stime. 100 on every Linux ABI Node runs on (`getconf CLK_TCK`). */
export const CLOCK_TICKS_PER_SECOND = 100;

export interface ProcStat {
  tid: number;
  comm: string;
  /** Field 14: user-mode CPU, clock ticks. */
  utimeTicks: number;
  /** Field 15: kernel-mode CPU, clock ticks. */
  stimeTicks: number;
}

/**
 * The fields of one `/proc/<pid>[/task/<tid>]/stat` line by their proc(5) number (1-based: 3 = state,
 * 14/15 = utime/stime, 19 = nice, 41 = policy). `comm` (field 2) is in parentheses and may itself
 * contain spaces and ')', so the fields after it are counted from the last ')'. Pure; the one reader
 * of stat lines (the CPU clocks here, the backfill workers' policy, the benchmarks).
 */
export function statFields(line: string): {
  tid: number;
  comm: string;
  field(n: number): string | undefined;
} {
  const open = line.indexOf("(");
  const close = line.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error(`not a /proc stat line: ${line.slice(0, 80)}`);
  // After ")": field 3 (state) is rest[0], so field n is rest[n - 3].
  const rest = line
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  return {
    tid: Number(line.slice(0, open).trim()),
    comm: line.slice(open + 1, close),
    field: (n) => rest[n - 3],
  };
}

/** Parses one stat line's thread id, name and CPU ticks (`statFields`). Pure. */
export function parseProcStat(line: string): ProcStat {
  const { tid, comm, field } = statFields(line);
  const utime = Number(field(14));
  const stime = Number(field(15));
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) {
    throw new Error(`no utime/stime in /proc stat line: ${line.slice(0, 80)}`);
  }
  return { tid, comm, utimeTicks: utime, stimeTicks: stime };
}

/** CPU ms of a parsed stat line (utime + stime). Pure. */
export function statCpuMs(stat: ProcStat, ticksPerSecond = CLOCK_TICKS_PER_SECOND): number {
  return ((stat.utimeTicks + stat.stimeTicks) * 1000) / ticksPerSecond;
}

/**
 * Parses `/proc/<pid>/task/<tid>/schedstat` ("run-ns wait-ns timeslices"): the same kernel counter
 * that utime + stime are scaled to (sum_exec_runtime), at nanosecond resolution. Returns ms. Pure.
 */
export function parseSchedstatMs(line: string): number {
  const ns = Number(line.trim().split(/\s+/)[0]);
  if (!Number.isFinite(ns)) throw new Error(`not a schedstat line: ${line.slice(0, 80)}`);
  return ns / 1e6;
}

/** `process.threadCpuUsage` (the calling thread's CPU, Node.js ≥ 23.9), or undefined where Node lacks it. */
const threadCpuUsage = (process as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.bind(process);

/** Thread name prefix of inference workers (and, inherited, their ORT pool threads) in /proc. */
export const WORKER_THREAD_NAME_PREFIX = "sluice-infer";

interface ClockOptions {
  /** `model.intraOpThreads` of the worker's session. */
  intraOpThreads: number;
  /** `threadId` of the worker, for a unique thread name (comm holds 15 bytes). */
  workerId: number;
}

/** Reads the CPU of the current worker thread (and its ORT pool); one per worker thread. */
export class ThreadCpuClock {
  /** Task directories summed by `nowMs()`: this thread, then (after `adoptPoolThreads`) its ORT pool too. */
  private dirs: string[] = ["/proc/thread-self"];
  /** `nowMs()` when the last call was charged (0: the thread's start). */
  private charged = 0;
  private constructor(
    readonly source: ThreadCpuSource,
    private readonly intraOpThreads: number,
    readonly threadName: string | null,
  ) {}

  /**
   * Call on the worker thread before the ORT session exists: on Linux it names the thread, so the
   * pool threads the session creates inherit the name and `adoptPoolThreads()` can find them (and
   * a benchmark can find all of them from outside).
   */
  static start(o: ClockOptions): ThreadCpuClock {
    const name = `${WORKER_THREAD_NAME_PREFIX}-${o.workerId}`.slice(0, 15);
    try {
      writeFileSync("/proc/thread-self/comm", name);
      const schedstat = readSafely("/proc/thread-self/schedstat") !== null;
      const clock = new ThreadCpuClock(schedstat ? "proc-schedstat" : "proc-stat", o.intraOpThreads, name);
      return clock;
    } catch {
      // Not Linux (or /proc is not mounted).
    }
    if (threadCpuUsage !== undefined && o.intraOpThreads === 1) {
      return new ThreadCpuClock("thread-cpu-usage", o.intraOpThreads, null);
    }
    return new ThreadCpuClock("wall-estimate", o.intraOpThreads, null);
  }

  /** After the session is created: the threads named like this one (itself and its ORT pool). */
  adoptPoolThreads(): void {
    if (this.threadName === null) return;
    const dirs = readdirSync("/proc/self/task")
      .map((tid) => `/proc/self/task/${tid}`)
      .filter((dir) => readSafely(`${dir}/comm`)?.trim() === this.threadName);
    if (dirs.length > 0) this.dirs = dirs;
  }

  /**
   * The CPU to charge to the call that started at `callStartedMs` (a `nowMs()` reading) and ends now.
   * Measured sources charge everything the threads spent since the previous call was charged (for the
   * first call: since the thread started, so loading the session counts), so the calls' figures add up
   * to the threads' whole CPU: GC, message handling and tensor finalisers between calls are not lost
   * (they were ~8 % of the worker's CPU when only the call windows were counted). The wall estimate
   * charges the call's own window only (an idle worker spends no CPU).
   */
  chargeCall(callStartedMs: number): number {
    const now = this.nowMs();
    const from = this.source === "wall-estimate" ? callStartedMs : this.charged;
    this.charged = now;
    return Math.max(0, now - from);
  }

  /** Cumulative CPU ms of the worker's threads; for `wall-estimate`, wall ms × intra-op threads. */
  nowMs(): number {
    switch (this.source) {
      case "proc-schedstat":
        return this.sum((dir) => parseSchedstatMs(readFileSync(`${dir}/schedstat`, "utf8")));
      case "proc-stat":
        return this.sum((dir) => statCpuMs(parseProcStat(readFileSync(`${dir}/stat`, "utf8"))));
      case "thread-cpu-usage": {
        const u = (threadCpuUsage as () => NodeJS.CpuUsage)();
        return (u.user + u.system) / 1000;
      }
      default:
        return performance.now() * this.intraOpThreads;
    }
  }

  private sum(read: (dir: string) => number): number {
    let ms = 0;
    for (const dir of this.dirs) {
      try {
        ms += read(dir);
      } catch {
        // A pool thread that ended drops out of the sum (callers clamp a call's delta at 0); ORT
        // keeps its pool for the session's life, so this does not happen in use.
      }
    }
    return ms;
  }
}

function readSafely(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/**
 * CPU the calling thread has used so far, ms: on the main thread, the main thread's own CPU (the
 * Kafka path, decoding, encoding, producing), without the workers'. The kernel's per-thread counter
 * on Linux (nanoseconds, `schedstat`), `process.threadCpuUsage()` where Node has it (≥ 23.9), else
 * the whole process's CPU, an upper bound that also counts the workers.
 */
export function mainThreadCpuMs(): number {
  const schedstat = readSafely("/proc/thread-self/schedstat");
  if (schedstat !== null) return parseSchedstatMs(schedstat);
  const u = threadCpuUsage !== undefined ? threadCpuUsage() : process.cpuUsage();
  return (u.user + u.system) / 1000;
}
