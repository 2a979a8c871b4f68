import { createHmac, hash } from "node:crypto";
import { SluiceError } from "../sluice-error.js";

export interface RequestIdHashOptions {
  /** Hex characters kept of each SHA-256 hash. Default 16 (64 bits: collisions negligible per batch). */
  length?: number;
  /**
   * Optional HMAC key: with it ids are HMAC-SHA256'd so guessable ids cannot be reversed from logs by
   * hashing candidates. Default none (plain SHA-256, so an operator can find a known id's lines with
   * `printf %s "$ID" | sha256sum | cut -c1-16`).
   */
  key?: string;
}

/** How request ids (and record keys) appear in logs: a truncated SHA-256, never the id itself. */
export class RequestIdHash {
  private readonly length: number;
  private readonly key: string | undefined;

  constructor(opts: RequestIdHashOptions = {}) {
    const length = opts.length ?? 16;
    if (!Number.isInteger(length) || length < 8 || length > 64) {
      throw new SluiceError("CONFIG_INVALID", `idHashLength must be an integer in 8..64, got ${length}`);
    }
    this.length = length;
    this.key = opts.key;
  }

  /** Truncated SHA-256 (or HMAC-SHA256 with a key) of `id`, hex. */
  of(id: string): string {
    // crypto.hash: the one-shot digest, ~2.4× faster than a Hash object per id (the batch log hashes
    // every id of every batch).
    const hex =
      this.key === undefined
        ? hash("sha256", id, "hex")
        : createHmac("sha256", this.key).update(id, "utf8").digest("hex");
    return hex.slice(0, this.length);
  }
}
