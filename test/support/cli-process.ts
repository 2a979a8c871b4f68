import { type ChildProcessByStdio, spawn } from "node:child_process";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { packageRoot } from "../../src/config/project-paths.js";
import type { BatchSeamSpec } from "./batch-seams.js";
import { builtCli } from "./built-cli.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the `sluice` CLI (the built dist/, ./built-cli.ts) as a real child process.
 * `env` is merged over a copy of process.env without KAFKA_BROKERS and SLUICE_* so the test's own
 * environment never leaks into the command under test.
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`sluice ${args.join(" ")} timed out after ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

type CliChild = ChildProcessByStdio<null, Readable, Readable>;

/** The runner's own SLUICE_* and KAFKA_BROKERS must not leak into the command under test. */
function cleanEnv(): Record<string, string | undefined> {
  return Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k !== "KAFKA_BROKERS" && !k.startsWith("SLUICE_")),
  );
}

/**
 * With `seams`, runs the test-only entry that installs them first (./sluice-with-seams.ts, through
 * tsx: it is TypeScript; the CLI it then runs is the same built one).
 */
function spawnCli(args: string[], env: Record<string, string>, seams?: BatchSeamSpec): CliChild {
  const entry = seams
    ? [
        "--import",
        "tsx",
        join(packageRoot(), "test", "support", "sluice-with-seams.ts"),
        "--seams",
        JSON.stringify(seams),
      ]
    : [builtCli()];
  return spawn(process.execPath, [...entry, ...args], {
    cwd: packageRoot(),
    env: { ...cleanEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** A running CLI child process; `done` resolves on close with stdout and stderr interleaved in `out`. */
export interface StartedCli {
  child: CliChild;
  done: Promise<{ code: number | null; out: string }>;
}

/**
 * Starts the `sluice` CLI like `runCli` but returns at once, so a test can signal the process. `seams`
 * installs batch test seams in the child (failing ids, slow shards, a held transaction).
 */
export function startCli(
  args: string[],
  env: Record<string, string> = {},
  seams?: BatchSeamSpec,
): StartedCli {
  const child = spawnCli(args, env, seams);
  let out = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    out += d.toString();
  });
  const done = new Promise<{ code: number | null; out: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, out })),
  );
  return { child, done };
}
