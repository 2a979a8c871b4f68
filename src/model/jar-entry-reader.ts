import { spawn } from "node:child_process";
import { readFile } from "node:fs/promises";
import { inflateRawSync } from "node:zlib";

/**
 * Reads one file out of a jar (a zip). Uses `unzip -p` when installed, else a minimal reader of the zip
 * central directory (stored and deflated entries; no zip64, which jars under 4 GiB never need).
 * Format: https://pkware.cachefly.net/webdocs/casestudies/APPNOTE.TXT (sections 4.3.7, 4.3.12, 4.3.16).
 */
export async function readJarEntry(jarPath: string, entryName: string): Promise<Buffer> {
  const viaUnzip = await unzipEntry(jarPath, entryName);
  if (viaUnzip !== null) return viaUnzip;
  return readZipEntry(await readFile(jarPath), entryName);
}

function unzipEntry(jarPath: string, entryName: string): Promise<Buffer | null> {
  return new Promise((resolve) => {
    const child = spawn("unzip", ["-p", jarPath, entryName], { stdio: ["ignore", "pipe", "ignore"] });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (c: Buffer) => chunks.push(c));
    child.on("error", () => resolve(null)); // not installed
    child.on("close", (code) => resolve(code === 0 ? Buffer.concat(chunks) : null));
  });
}

export function readZipEntry(zip: Buffer, entryName: string): Buffer {
  const EOCD = 0x06054b50;
  let eocd = -1;
  // The end-of-central-directory record sits in the last 22 + 65535 (max comment) bytes.
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error("not a zip file: end of central directory not found");
  const entries = zip.readUInt16LE(eocd + 10);
  let p = zip.readUInt32LE(eocd + 16);
  for (let n = 0; n < entries; n++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error("corrupt zip central directory");
    const method = zip.readUInt16LE(p + 10);
    const compressedSize = zip.readUInt32LE(p + 20);
    const nameLength = zip.readUInt16LE(p + 28);
    const extraLength = zip.readUInt16LE(p + 30);
    const commentLength = zip.readUInt16LE(p + 32);
    const localOffset = zip.readUInt32LE(p + 42);
    const name = zip.toString("utf8", p + 46, p + 46 + nameLength);
    if (name === entryName) {
      const localNameLength = zip.readUInt16LE(localOffset + 26);
      const localExtraLength = zip.readUInt16LE(localOffset + 28);
      const start = localOffset + 30 + localNameLength + localExtraLength;
      const data = zip.subarray(start, start + compressedSize);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`zip entry ${entryName} uses unsupported compression method ${method}`);
    }
    p += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`zip has no entry ${entryName}`);
}
