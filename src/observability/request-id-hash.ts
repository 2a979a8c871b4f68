import { createHash, createHmac } from "node:crypto";
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
    const h = this.key === undefined ? createHash("sha256") : createHmac("sha256", this.key);
    return h.update(id, "utf8").digest("hex").slice(0, this.length);
  }
}
