import { execFile, execFileSync } from "node:child_process";

export interface PodmanResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Path of the podman binary, or undefined when it is not installed. */
export function podmanPath(): string | undefined {
  try {
    return execFileSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Runs `podman ARGS`; resolves with its exit code and output (never rejects on a non-zero exit). */
export function podman(args: string[], timeoutMs = 120_000): Promise<PodmanResult> {
  return new Promise((resolve) => {
    execFile(
      "podman",
      args,
      { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Like `podman()`, but throws with the output when the exit code is not 0. */
export async function podmanOk(args: string[], timeoutMs?: number): Promise<string> {
  const r = await podman(args, timeoutMs);
  if (r.code !== 0) {
    throw new Error(
      `podman ${args.join(" ")} exited ${r.code}:\n${r.stderr.slice(-4000)}\n${r.stdout.slice(-2000)}`,
    );
  }
  return r.stdout;
}
