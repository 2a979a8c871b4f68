import { existsSync, readFileSync } from "node:fs";
import { request } from "node:http";
import { SluiceError, type SluiceErrorCode } from "../sluice-error.js";
import { exiting, run, signal, sleep } from "./broker-process.js";

/*
 * What a development JVM service started from a run folder needs besides the process helpers of
 * broker-process.ts: a Java version check, a Maven Central fetch, its state file, a bounded stop
 * that only ever signals the recorded pid while it is still the service, a readiness poll over
 * HTTP on 127.0.0.1, and the tail of its log for error messages. LocalZipkin uses it;
 * LocalRegistry has the same steps inline.
 */

/** The major version `java -version` reports (17 for "17.0.15", 8 for "1.8.0"); throws DEPENDENCY_MISSING. */
export async function requireJava(
  javaCommand: string,
  minimum: number,
  what: string,
  help: string,
): Promise<void> {
  let output: string;
  try {
    output = await run(javaCommand, ["-version"], { stderr: true });
  } catch (error) {
    throw new SluiceError("DEPENDENCY_MISSING", `Java ${minimum}+ is needed to run ${what}: ${help}`, {
      cause: error,
    });
  }
  const match = /version "(\d+)(?:\.(\d+))?/.exec(output);
  const major = match ? (match[1] === "1" ? Number(match[2]) : Number(match[1])) : 0;
  if (major < minimum) {
    throw new SluiceError(
      "DEPENDENCY_MISSING",
      `${what} needs Java ${minimum}+, found ${match ? major : "an unknown version"}: ${help}`,
    );
  }
}

/**
 * `mvn dependency:copy` of `artifact` (`group:artifact:version[:type[:classifier]]`) into `outDir`.
 * No Maven: DEPENDENCY_MISSING with `help`; a failed fetch: `failure` naming the artifact.
 */
export async function fetchFromMaven(
  mvnCommand: string,
  artifact: string,
  outDir: string,
  errors: { failure: SluiceErrorCode; help: string },
): Promise<void> {
  try {
    await run(mvnCommand, [
      "-q",
      "-B",
      "dependency:copy",
      `-Dartifact=${artifact}`,
      `-DoutputDirectory=${outDir}`,
    ]);
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === "ENOENT";
    throw new SluiceError(
      missing ? "DEPENDENCY_MISSING" : errors.failure,
      missing
        ? `Maven is needed to fetch ${artifact}: ${errors.help}`
        : `could not fetch ${artifact} with Maven (network? version?): ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** The JSON state file of a run folder, or undefined when it is missing or unreadable. */
export function readStateFile<T>(file: string): T | undefined {
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, "utf8")) as T;
  } catch {
    return undefined;
  }
}

/** The last lines of a log file, for start-up errors. */
export function logTail(file: string, lines = 20): string {
  if (!existsSync(file)) return "(no log output)";
  return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n") || "(no log output)";
}

/**
 * SIGTERM to `pid`, SIGKILL after `timeoutMs`; `isOurs` says whether the pid is still the service
 * (checked before every signal, so a reused pid is never signalled). Resolves `forced` when it took
 * SIGKILL; throws when even that did not end it.
 */
export async function stopService(
  pid: number,
  isOurs: () => boolean,
  timeoutMs: number,
  what: string,
): Promise<{ forced: boolean }> {
  // Gone = no longer the service and not still tearing down (see `exiting`).
  const isGone = () => !isOurs() && !exiting(pid);
  const gone = async (ms: number) => {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (isGone()) return true;
      await sleep(100);
    }
    return isGone();
  };
  if (!isOurs()) return { forced: false };
  signal(pid, "SIGTERM");
  if (await gone(timeoutMs)) return { forced: false };
  if (isOurs()) signal(pid, "SIGKILL");
  if (await gone(10_000)) return { forced: true };
  throw new SluiceError("INTERNAL", `${what} process ${pid} survived SIGKILL; check it with ps`);
}

/**
 * Polls `GET http://127.0.0.1:<port><path>` until `ready(status, body)` holds; throws when `exited()`
 * reports the process gone or `timeoutMs` passes (with the last answer).
 */
export async function waitForHttp(
  port: number,
  path: string,
  ready: (status: number, body: string) => boolean,
  timeoutMs: number,
  exited: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    const died = exited();
    if (died) throw new Error(`the process ${died}`);
    const answer = await get(port, path);
    if (typeof answer !== "string" && ready(answer.status, answer.body)) return;
    last = typeof answer === "string" ? answer : `HTTP ${answer.status}`;
    await sleep(250);
  }
  throw new Error(`timed out after ${timeoutMs} ms (last answer: ${last})`);
}

function get(port: number, path: string): Promise<{ status: number; body: string } | string> {
  return new Promise((resolvePromise) => {
    const req = request({ host: "127.0.0.1", port, path, method: "GET", timeout: 2000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        if (body.length < 65_536) body += chunk;
      });
      res.on("end", () => resolvePromise({ status: res.statusCode ?? 0, body }));
      res.on("error", (error) => resolvePromise(error.message));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", (error) => resolvePromise(error.message));
    req.end();
  });
}
