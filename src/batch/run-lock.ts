import { open, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { SluiceError } from "../sluice-error.js";

export const LOCK_FILE = "batch.lock";

/**
 * One batch process per state directory: two writers would interleave manifest updates. The lock file
 * holds the owner's pid; a lock whose process is gone (e.g. after SIGKILL) is taken over, so a crashed
 * run never blocks its own resume.
 */
export class RunLock {
  private constructor(private readonly path: string) {}

  static async acquire(dir: string): Promise<RunLock> {
    const path = join(dir, LOCK_FILE);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        const handle = await open(path, "wx");
        await handle.writeFile(`${process.pid}\n`);
        await handle.close();
        return new RunLock(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      }
      const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `another sluice batch (pid ${pid}) is using ${dir}; wait for it, or stop it and run the command again`,
        );
      }
      await rm(path, { force: true }); // stale: its owner is gone
    }
    throw new SluiceError(
      "CONFIG_INVALID",
      `cannot take the batch lock ${path}; another run keeps recreating it`,
    );
  }

  async release(): Promise<void> {
    await rm(this.path, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
