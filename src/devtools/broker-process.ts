import { execFile, execFileSync, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import type { SluiceError } from "../sluice-error.js";

/** What the local broker records in its run folder about the process it started. */
export interface BrokerState {
  pid: number;
  port: number;
  controllerPort: number;
  kafkaVersion: string;
  startedAt: string;
  serverProperties: string;
}

/*
 * Process and port helpers of the local broker: running the JVM tools, recognising our own broker
 * process (never signal a pid that is not it), waiting for it to exit, finding free ports.
 */

export function run(command: string, args: string[], opts: { stderr?: boolean } = {}): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(command, args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) {
        const detail = `${stderr}${stdout}`.trim().split("\n").slice(-15).join("\n");
        reject(
          Object.assign(new Error(`${command} ${args.at(-1)} failed: ${detail || error.message}`), {
            code: (error as NodeJS.ErrnoException).code,
          }),
        );
      } else {
        resolvePromise(opts.stderr ? `${stderr}${stdout}` : stdout);
      }
    });
  });
}

/** True when `pid` is alive (not a zombie) and its command line is our broker for this run folder. */
export function isOurBroker(state: BrokerState): boolean {
  const command = commandLine(state.pid);
  return command?.includes("kafka.Kafka") === true && command.includes(state.serverProperties);
}

/** True when `pid` is alive (not a zombie) and its command line contains every one of `markers`. */
export function isRunningWith(pid: number, markers: readonly string[]): boolean {
  const command = commandLine(pid);
  return command !== undefined && markers.every((m) => command.includes(m));
}

function commandLine(pid: number): string | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const proc = `/proc/${pid}`;
  if (existsSync("/proc/self")) {
    try {
      // A zombie still answers kill(pid, 0); it is dead for our purposes.
      const stat = readFileSync(`${proc}/stat`, "utf8");
      if (/^\d+ \(.*\) Z/.test(stat)) return undefined;
      return readFileSync(`${proc}/cmdline`, "utf8").split("\0").join(" ");
    } catch {
      return undefined;
    }
  }
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  // No /proc (macOS): ask ps.
  try {
    return execFileSync("ps", ["-o", "args=", "-p", String(pid)], { encoding: "utf8" });
  } catch {
    return undefined;
  }
}

/**
 * True while `pid` is still tearing down after it stopped being the service: the kernel has already
 * released its memory, so its command line reads empty, but it is not yet a zombie (Linux; elsewhere
 * false). A stop that takes an empty command line for "gone" returns while the process still runs.
 */
export function exiting(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || !existsSync("/proc/self")) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    if (/^\d+ \(.*\) [ZX]/.test(stat)) return false;
    return readFileSync(`/proc/${pid}/cmdline`, "utf8") === "";
  } catch {
    return false;
  }
}

export function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function portFree(port: number): Promise<number | undefined> {
  return new Promise((resolvePromise) => {
    const server = createServer();
    server.once("error", () => resolvePromise(undefined));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === "object" && address ? address.port : undefined;
      server.close(() => resolvePromise(bound));
    });
  });
}

/** `preferred` when free, else any free port (never one in `avoid`). */
export async function choosePort(preferred: number, avoid: number[] = []): Promise<number> {
  if (preferred !== 0 && !avoid.includes(preferred)) {
    const free = await portFree(preferred);
    if (free !== undefined) return free;
  }
  for (;;) {
    const free = await portFree(0);
    if (free !== undefined && !avoid.includes(free)) return free;
  }
}

/** A JVM started by `spawnDetached`: its pid, and how it ended once it has (for start-up errors). */
export interface DetachedProcess {
  pid: number;
  exited: () => string | undefined;
}

/**
 * Starts `command` detached in its own session (it outlives the CLI that started it), stdout and
 * stderr appended to `logFile`. A command that cannot be spawned is `failure` (the caller's code and
 * advice on what to install).
 */
export function spawnDetached(
  command: string,
  args: string[],
  opts: { logFile: string; cwd: string; env?: NodeJS.ProcessEnv; failure: () => SluiceError },
): DetachedProcess {
  const out = openSync(opts.logFile, "a");
  const child = spawn(command, args, {
    detached: true,
    stdio: ["ignore", out, out],
    cwd: opts.cwd,
    ...(opts.env ? { env: opts.env } : {}),
  });
  closeSync(out);
  const pid = child.pid;
  if (pid === undefined) throw opts.failure();
  let exited: string | undefined;
  child.on("exit", (code, sig) => {
    exited = `exited with ${sig ?? `code ${code}`}`;
  });
  child.unref();
  return { pid, exited: () => exited };
}
