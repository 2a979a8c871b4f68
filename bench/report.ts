import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Shared writer for BENCHMARKS.md: each benchmark owns the block between
 * `<!-- bench:<name>:start -->` and `<!-- bench:<name>:end -->`, replaced in place (appended the first
 * time), so benchmarks never overwrite each other's figures.
 */
export async function writeBenchmarkSection(
  name: string,
  markdown: string,
  file = benchmarksFile(),
): Promise<void> {
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const current = existsSync(file) ? await readFile(file, "utf8") : "# Benchmarks\n";
  const i = current.indexOf(start);
  const j = current.indexOf(end);
  const next =
    i >= 0 && j > i
      ? current.slice(0, i) + block + current.slice(j + end.length)
      : `${current.trimEnd()}\n\n${block}\n`;
  await writeFile(file, next);
  formatWithBiome(file);
}

/**
 * `npm test` lints the whole repository, markdown included; format the file the way biome would so a
 * benchmark run never leaves the tree failing lint. Skipped silently when biome is not installed.
 */
function formatWithBiome(file: string): void {
  let biome: string;
  try {
    biome = createRequire(import.meta.url).resolve("@biomejs/biome/bin/biome");
  } catch {
    return;
  }
  spawnSync(process.execPath, [biome, "format", "--write", file], { stdio: "ignore", cwd: dirname(file) });
}

/** The project's BENCHMARKS.md, found from this file whether it runs from bench/ (tsx) or dist/bench/. */
export function benchmarksFile(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && JSON.parse(readFileSync(manifest, "utf8")).name === "sluice") {
      return join(dir, "BENCHMARKS.md");
    }
    dir = dirname(dir);
  }
  return join(process.cwd(), "BENCHMARKS.md");
}

/** One line describing the machine and runtime, for the conditions of a benchmark section. */
export function machineDescription(): string {
  const cpu = cpus();
  const load = loadavg().map((l) => l.toFixed(1));
  return `${cpu[0]?.model ?? "unknown CPU"}, ${cpu.length} cores, Node ${process.version}, load average ${load.join(" / ")} (1/5/15 min)`;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}
