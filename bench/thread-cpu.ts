import { readdirSync, readFileSync } from "node:fs";
import { statFields } from "../src/model/thread-cpu-clock.js";
import { CLK_TCK } from "./proc-cpu.js";

/**
 * Per-thread CPU of some processes from Linux's /proc (bench:slo): what runs in the seconds the
 * online tail rises. Every sample reads each thread's name, state, nice value and CPU ticks; the
 * threads are grouped by name without its number (`GC Thread#3` → `GC Thread#`, `sluice-infer-4` →
 * `sluice-infer-`) and nice value, so a group is one kind of work: the main thread (`node`), the
 * inference workers and their ORT pools (`sluice-infer-`, nice 10 for backfill workers), V8's
 * platform threads, libuv's pool, the broker's network and request handler threads, its GCs.
 * Reading ~150 small files every 250 ms costs about 1 % of a core.
 */

interface ThreadReading {
  comm: string;
  /** The process's main thread (tid = pid). */
  main?: boolean;
  /** /proc state letter: R runnable, S sleeping, D waiting on I/O, … */
  state: string;
  nice: number;
  ticks: number;
}

interface ThreadSample {
  at: number;
  /** process name → tid → reading */
  threads: Record<string, Map<number, ThreadReading>>;
}

/** One kind of thread of one process over a stretch of time. */
export interface ThreadGroupCpu {
  process: string;
  group: string;
  /** Threads of the group seen in the stretch. */
  threads: number;
  /** CPU of the group over the stretch, cores. */
  cores: number;
  /** Mean number of the group's threads in state R (runnable or running) at the samples. */
  runnable: number;
}

/**
 * The group of a thread: its name without a trailing number, and its nice value when not 0; a
 * process's main thread (tid = pid) is `main thread` (Node.js names its other threads `node` too). Pure.
 */
export function threadGroup(comm: string, nice: number, main = false): string {
  const name = main ? "main thread" : comm.replace(/\d+$/, "");
  return nice === 0 ? name : `${name} (nice ${nice})`;
}

/** Parses a /proc/<pid>/task/<tid>/stat line into a reading (src/model/thread-cpu-clock.ts `statFields`). Pure. */
export function parseThreadStat(line: string): ThreadReading {
  const { comm, field } = statFields(line);
  return {
    comm,
    state: field(3) ?? "?",
    ticks: Number(field(14)) + Number(field(15)),
    nice: Number(field(19)),
  };
}

function readThreads(pid: number): Map<number, ThreadReading> {
  const out = new Map<number, ThreadReading>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const reading = parseThreadStat(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8"));
      out.set(Number(tid), Number(tid) === pid ? { ...reading, main: true } : reading);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return out;
}

/** Samples the threads of the named processes every `everyMs`. */
export class ThreadSampler {
  readonly samples: ThreadSample[] = [];
  private readonly timer: NodeJS.Timeout;
  constructor(
    private readonly pids: Record<string, number | undefined>,
    everyMs = 250,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Each process's thread groups over [from, to): CPU in cores and mean runnable threads, busiest first. */
  groups(from: number, to: number): ThreadGroupCpu[] {
    const inside = this.samples.filter((s) => s.at >= from && s.at < to);
    const first = inside[0];
    const last = inside.at(-1);
    if (first === undefined || last === undefined || last.at <= first.at) return [];
    const seconds = (last.at - first.at) / 1000;
    const out = new Map<string, ThreadGroupCpu & { tids: Set<number> }>();
    const entry = (process: string, group: string) => {
      const key = `${process}\u0000${group}`;
      let e = out.get(key);
      if (e === undefined) {
        e = { process, group, threads: 0, cores: 0, runnable: 0, tids: new Set() };
        out.set(key, e);
      }
      return e;
    };
    for (const process of Object.keys(this.pids)) {
      const a = first.threads[process] ?? new Map();
      for (const [tid, r] of last.threads[process] ?? new Map()) {
        const e = entry(process, threadGroup(r.comm, r.nice, r.main));
        e.tids.add(tid);
        // A thread born inside the stretch counts from 0.
        e.cores += (r.ticks - (a.get(tid)?.ticks ?? 0)) / CLK_TCK / seconds;
      }
      for (const s of inside)
        for (const r of s.threads[process]?.values() ?? [])
          if (r.state === "R")
            entry(process, threadGroup(r.comm, r.nice, r.main)).runnable += 1 / inside.length;
    }
    return [...out.values()]
      .map(({ tids, ...g }) => ({ ...g, threads: tids.size }))
      .sort((x, y) => y.cores - x.cores);
  }

  private sample(): void {
    const threads: ThreadSample["threads"] = {};
    for (const [name, pid] of Object.entries(this.pids))
      if (pid !== undefined) threads[name] = readThreads(pid);
    this.samples.push({ at: Date.now(), threads });
  }
}

/**
 * A Markdown table of thread groups over stretches of one run (columns: each stretch's cores and
 * mean runnable threads), the `top` groups busiest in the `sortBy` stretch first; `machineCores` per
 * stretch adds a row for the rest of the machine (processes not sampled: the submit, the benchmark).
 */
export function threadTable(
  stretches: { name: string; groups: ThreadGroupCpu[]; machineCores: number }[],
  sortBy: number,
  top = 14,
): string[] {
  const key = (g: ThreadGroupCpu) => `${g.process} ${g.group}`;
  const maps = stretches.map((s) => new Map(s.groups.map((g) => [key(g), g])));
  const all = new Map<string, ThreadGroupCpu>();
  for (const s of stretches) for (const g of s.groups) if (!all.has(key(g))) all.set(key(g), g);
  const coresIn = (i: number, k: string) => maps[i]?.get(k)?.cores ?? 0;
  const rows = [...all.values()]
    .sort((a, b) => coresIn(sortBy, key(b)) - coresIn(sortBy, key(a)))
    .slice(0, top);
  const rest = stretches.map((s) => s.machineCores - s.groups.reduce((a, g) => a + g.cores, 0));
  return [
    `| process | threads | count | ${stretches.map((s) => `${s.name} cores | ${s.name} runnable`).join(" | ")} |`,
    `| --- | --- | --- | ${stretches.map(() => "--- | ---").join(" | ")} |`,
    ...rows.map(
      (g) =>
        `| ${g.process} | \`${g.group}\` | ${g.threads} | ${maps.map((m) => `${(m.get(key(g))?.cores ?? 0).toFixed(2)} | ${(m.get(key(g))?.runnable ?? 0).toFixed(1)}`).join(" | ")} |`,
    ),
    `| other processes | (not sampled) | – | ${rest.map((c) => `${Math.max(0, c).toFixed(2)} | –`).join(" | ")} |`,
  ];
}
