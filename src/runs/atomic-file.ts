import { createHash } from "node:crypto";
import { createWriteStream, type WriteStream } from "node:fs";
import { open, rename, rm } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * Files that either exist complete or not at all: write to `<path>.tmp`, fsync, rename, fsync the
 * directory. A crash leaves at most a stale `.tmp`, which the next run removes or overwrites.
 */
export const TEMP_SUFFIX = ".tmp";

export async function writeFileAtomic(path: string, data: string | Buffer): Promise<void> {
  const tmp = path + TEMP_SUFFIX;
  const handle = await open(tmp, "w");
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(tmp, path);
  await syncDir(dirname(path));
}

/** Streams bytes into `<path>.tmp`, hashing them on the way; `commit()` fsyncs and renames. */
export class AtomicFileWriter {
  private readonly tmp: string;
  private readonly stream: WriteStream;
  private readonly hash = createHash("sha256");
  private bytesWritten = 0;
  private failure: Error | null = null;

  constructor(private readonly path: string) {
    this.tmp = path + TEMP_SUFFIX;
    this.stream = createWriteStream(this.tmp);
    this.stream.on("error", (err) => {
      this.failure = err;
    });
  }

  /** Resolves when the stream accepts more (backpressure). */
  async write(chunk: string | Buffer): Promise<void> {
    if (this.failure) throw this.failure;
    const buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk;
    this.hash.update(buf);
    this.bytesWritten += buf.length;
    if (!this.stream.write(buf)) {
      await new Promise<void>((resolve, reject) => {
        const onDrain = () => {
          this.stream.off("error", onError);
          resolve();
        };
        const onError = (err: Error) => {
          this.stream.off("drain", onDrain);
          reject(err);
        };
        this.stream.once("drain", onDrain);
        this.stream.once("error", onError);
      });
    }
  }

  async commit(): Promise<{ sha256: string; bytes: number }> {
    await new Promise<void>((resolve, reject) => {
      this.stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
    });
    if (this.failure) throw this.failure;
    const handle = await open(this.tmp, "r+");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(this.tmp, this.path);
    await syncDir(dirname(this.path));
    return { sha256: this.hash.digest("hex"), bytes: this.bytesWritten };
  }

  async abort(): Promise<void> {
    this.stream.destroy();
    await rm(this.tmp, { force: true });
  }
}

/** Makes a rename durable. Some platforms cannot open directories; there the rename is still atomic. */
async function syncDir(dir: string): Promise<void> {
  try {
    const handle = await open(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // best effort (see above)
  }
}
