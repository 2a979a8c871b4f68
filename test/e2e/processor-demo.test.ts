import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { builtCli } from "../support/built-cli.js";
import { uniqueName } from "../support/kafka-harness.js";
import { serveEnv } from "../support/serve-process.js";

// `npm start -- --once` runs `sluice demo --once`; here against the test broker (KAFKA_BROKERS) with
// private topics, and the real default model.
describe("sluice demo --once", () => {
  it("prints sample results, a dead letter and a counted duplicate, then exits 0", async () => {
    const env = { ...process.env, ...serveEnv(uniqueName("demo")) };
    const child = spawn(process.execPath, [builtCli(), "demo", "--once"], {
      cwd: resolve(import.meta.dirname, "../.."),
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((res) => child.on("exit", (c) => res(c)));
    expect(code, out).toBe(0);
    expect(out).toMatch(/ok\s+embedding\[384\]/);
    expect(out).toMatch(/expired\s+DEADLINE_EXCEEDED/);
    expect(out).toMatch(/rejected\s+EMPTY_TEXT/);
    expect(out).toMatch(/dead\s+DECODE_FAILED/);
    expect(out).toMatch(/Duplicates counted \(no second result\): 1/);
    expect(out).toMatch(/metrics http:\/\/127\.0\.0\.1:\d+\/metrics/);
  }, 120_000);
});
