/**
 * Where a process's main thread spent its time: reads a V8 CPU profile (`node --cpu-prof`, a
 * `.cpuprofile` file) and prints the self time of its samples by area of the code, then the functions
 * with the most self time. An area is Sluice's room (src/kafka/write, src/delivery, …), a package
 * (kafkajs's protocol, its network layer, …), Node.js itself, the garbage collector, or idle time
 * (the event loop waiting: the profile's "(idle)" node). Measures; the areas are a reading aid.
 *
 *   node --import tsx bench/cpu-profile-summary.ts PROFILE.cpuprofile [--from-ms N] [--top N]
 *   --from-ms: skip the first N ms of the profile (start-up); --top: functions listed (default 25).
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The area a frame's code belongs to (see the module comment). */
export function areaOf(functionName: string, url: string): string {
  if (functionName === "(idle)") return "idle (event loop waiting)";
  if (functionName === "(garbage collector)") return "garbage collector";
  if (functionName === "(program)") return "V8 and native code outside JS";
  if (url === "") return `native: ${functionName || "(anonymous)"}`;
  const path = url.replace(/^file:\/\//, "");
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(path);
  if (pkg) {
    const [, name, rest] = pkg as unknown as [string, string, string];
    if (name === "kafkajs") return `kafkajs/${rest.split("/").slice(0, 2).join("/").replace(/\.js$/, "")}`;
    return name;
  }
  if (path.startsWith("node:")) return `node: ${path.slice(5).split("/")[0]}`;
  const src = /\/(?:dist\/)?(src|bench)\/(.*)$/.exec(path);
  if (src) {
    const [, top, rest] = src as unknown as [string, string, string];
    const parts = rest.split("/");
    // src/<room>/<sub-room>/file: the room and sub-room; src/<room>/file: the room.
    return `${top}/${parts.length > 2 ? parts.slice(0, 2).join("/") : (parts[0] ?? "").replace(/\.js$/, "")}`;
  }
  return path;
}

export interface ProfileSummary {
  totalMs: number;
  areas: { area: string; ms: number }[];
  functions: { name: string; area: string; ms: number }[];
}

/** Self time per area and per function of `profile`, from `fromMs` after its start. */
export function summarize(profile: CpuProfile, fromMs = 0): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const areas = new Map<string, number>();
  const functions = new Map<string, { name: string; area: string; ms: number }>();
  let at = 0;
  let totalMs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const deltaMs = (profile.timeDeltas[i] ?? 0) / 1000;
    at += deltaMs;
    if (at <= fromMs) continue;
    const node = byId.get(profile.samples[i] as number);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const area = areaOf(functionName, url);
    areas.set(area, (areas.get(area) ?? 0) + deltaMs);
    const key = `${functionName}|${url}|${lineNumber}`;
    const f = functions.get(key) ?? {
      name: `${functionName || "(anonymous)"} ${url.split("/").slice(-1)[0] ?? ""}:${lineNumber + 1}`,
      area,
      ms: 0,
    };
    f.ms += deltaMs;
    functions.set(key, f);
    totalMs += deltaMs;
  }
  return {
    totalMs,
    areas: [...areas].map(([area, ms]) => ({ area, ms })).sort((a, b) => b.ms - a.ms),
    functions: [...functions.values()].sort((a, b) => b.ms - a.ms),
  };
}

function main(): void {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith("--"));
  if (!file) throw new Error("usage: cpu-profile-summary.ts PROFILE.cpuprofile [--from-ms N] [--top N]");
  const opt = (name: string, fallback: number) => {
    const i = args.indexOf(name);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const s = summarize(JSON.parse(readFileSync(file, "utf8")) as CpuProfile, opt("--from-ms", 0));
  const pct = (ms: number) => `${((100 * ms) / s.totalMs).toFixed(1)} %`;
  const lines = [
    `${file}: ${(s.totalMs / 1000).toFixed(1)} s of main-thread samples`,
    "",
    "| area | self ms | share |",
    "| --- | ---: | ---: |",
    ...s.areas
      .filter((a) => a.ms >= s.totalMs * 0.005)
      .map((a) => `| ${a.area} | ${a.ms.toFixed(0)} | ${pct(a.ms)} |`),
    "",
    "| function | area | self ms | share |",
    "| --- | --- | ---: | ---: |",
    ...s.functions
      .slice(0, opt("--top", 25))
      .map((f) => `| ${f.name} | ${f.area} | ${f.ms.toFixed(0)} | ${pct(f.ms)} |`),
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
}

if (
  process.argv[1]?.endsWith("cpu-profile-summary.ts") ||
  process.argv[1]?.endsWith("cpu-profile-summary.js")
)
  main();
