import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { defaultConfig } from "../../../src/config/config-schema.js";
import { packageRoot } from "../../../src/config/project-paths.js";

/** Compose durations such as "30s", "1m30s", "500ms" in ms. */
function durationMs(text: string): number {
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    ms += Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as "ms" | "s" | "m" | "h"];
  }
  return ms;
}

describe("docker-compose.yml", () => {
  const compose = parse(readFileSync(join(packageRoot(), "docker-compose.yml"), "utf8")) as {
    services: Record<string, { stop_grace_period?: string; environment?: Record<string, string> }>;
  };

  it("gives sluice a stop grace period above shutdown.timeoutMs (Docker's default 10 s is below it)", () => {
    const sluice = compose.services.sluice!;
    const timeoutMs = Number(
      sluice.environment?.SLUICE_SHUTDOWN__TIMEOUT_MS ?? defaultConfig().shutdown.timeoutMs,
    );
    expect(sluice.stop_grace_period).toBeDefined();
    expect(durationMs(sluice.stop_grace_period!)).toBeGreaterThan(timeoutMs);
    expect(durationMs("1m30s")).toBe(90_000);
  });
});
