import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LocalZipkin } from "../../../src/devtools/local-zipkin.js";

const scratch = mkdtempSync(join(tmpdir(), "sluice-zipkin-unit-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A stand-in `java` whose `-version` reports `version` (on stderr, as the JDK does). */
function fakeJava(version: string): string {
  const file = join(scratch, `java-${version}`);
  writeFileSync(file, `#!/bin/sh\necho 'openjdk version "${version}" 2024-01-16' >&2\n`);
  chmodSync(file, 0o755);
  return file;
}

const zipkin = (options: ConstructorParameters<typeof LocalZipkin>[0]) =>
  new LocalZipkin({ runDir: join(scratch, "run"), cacheDir: join(scratch, "cache"), port: 0, ...options });

const missing = (message: RegExp) =>
  expect.objectContaining({ code: "DEPENDENCY_MISSING", message: expect.stringMatching(message) });

describe("LocalZipkin without its tools", () => {
  it("no Java: DEPENDENCY_MISSING saying what to install", async () => {
    await expect(zipkin({ javaCommand: join(scratch, "no-such-java") }).start()).rejects.toEqual(
      missing(/Java 17\+ is needed to run Zipkin 3\.6\.1: install Java 17\+ and Maven/),
    );
  });

  it("Java older than 17: DEPENDENCY_MISSING naming the version found", async () => {
    await expect(zipkin({ javaCommand: fakeJava("11.0.22") }).start()).rejects.toEqual(
      missing(/Zipkin 3\.6\.1 needs Java 17\+, found 11/),
    );
    await expect(zipkin({ javaCommand: fakeJava("1.8.0_392") }).start()).rejects.toEqual(missing(/found 8/));
  });

  it("no Maven to fetch the jar: DEPENDENCY_MISSING naming the artifact", async () => {
    const z = zipkin({ javaCommand: fakeJava("17.0.15"), mvnCommand: join(scratch, "no-such-mvn") });
    await expect(z.start()).rejects.toEqual(
      missing(/Maven is needed to fetch io\.zipkin:zipkin-server:3\.6\.1:jar:exec/),
    );
    expect(await z.status()).toEqual({ running: false, runDir: join(scratch, "run") });
  });

  it("checks its options", () => {
    expect(() => new LocalZipkin({ version: "latest" })).toThrow(/not like 3\.6\.1/);
    expect(() => new LocalZipkin({ port: 70_000 })).toThrow(/0\.\.65535/);
  });

  it("stop and status with nothing running", async () => {
    const z = zipkin({});
    expect(await z.stop()).toEqual({ stopped: false });
    expect((await z.status()).running).toBe(false);
  });
});
