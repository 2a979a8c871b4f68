import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LOCK_FILE, RunLock } from "../../../src/batch/run-lock.js";
import { isSluiceError } from "../../../src/sluice-error.js";

describe("RunLock", () => {
  it("refuses a directory held by a live process and takes over a stale lock", async () => {
    const dir = await mkdtemp(join(tmpdir(), "sluice-lock-"));
    try {
      const lock = await RunLock.acquire(dir);
      // Same pid counts as ours; simulate another live process with the parent's pid.
      await writeFile(join(dir, LOCK_FILE), `${process.ppid}\n`);
      const err = await RunLock.acquire(dir).catch((e: unknown) => e);
      expect(isSluiceError(err, "CONFIG_INVALID")).toBe(true);
      expect((err as Error).message).toMatch(`pid ${process.ppid}`);
      await writeFile(join(dir, LOCK_FILE), "999999999\n"); // no such process
      const taken = await RunLock.acquire(dir);
      await taken.release();
      await lock.release();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
