import { spawn } from "node:child_process";
import { join } from "node:path";
import { packageRoot } from "../../src/config/project-paths.js";

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the `sluice` CLI from source (through tsx, so no build is needed) as a real child process.
 * `env` is merged over a copy of process.env without KAFKA_BROKERS and SLUICE_* so the test's own
 * environment never leaks into the command under test.
 */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 120_000,
): Promise<CliResult> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k !== "KAFKA_BROKERS" && !k.startsWith("SLUICE_")),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(packageRoot(), "src", "cli", "main.ts"), ...args],
      {
        cwd: packageRoot(),
        env: { ...base, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
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
