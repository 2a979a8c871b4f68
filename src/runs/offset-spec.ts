import { SluiceError } from "../sluice-error.js";

/** Half-open offset range of one partition: [startOffset, endOffset). Offsets are decimal strings. */
export interface PartitionRange {
  partition: number;
  startOffset: string;
  endOffset: string;
}

/**
 * `--from` / `--to` of a topic input:
 * - `earliest` (default for --from) / `latest` (default for --to: the end offsets when the run starts),
 * - per-partition offsets `0:100,1:250`: only the partitions named in --from or --to are read; a partition
 *   named in one flag only uses the other flag's default,
 * - an ISO-8601 timestamp `2026-11-30T00:00:00Z` (first offset whose record timestamp is ≥ it).
 * Ranges are half-open: [from, to).
 */
export type OffsetSpec =
  | { kind: "earliest" }
  | { kind: "latest" }
  | { kind: "timestamp"; ms: number }
  | { kind: "offsets"; offsets: Map<number, bigint> };

export function parseOffsetSpec(text: string | null | undefined, flag: "--from" | "--to"): OffsetSpec {
  if (text === null || text === undefined || text === "") {
    return flag === "--from" ? { kind: "earliest" } : { kind: "latest" };
  }
  const t = text.trim();
  if (t === "earliest" || t === "latest") return { kind: t };
  if (/^\d+:\d+(,\d+:\d+)*$/.test(t)) {
    const offsets = new Map<number, bigint>();
    for (const part of t.split(",")) {
      const [p, o] = part.split(":") as [string, string];
      const partition = Number(p);
      if (offsets.has(partition)) {
        throw new SluiceError("CONFIG_INVALID", `${flag} names partition ${partition} twice: "${text}"`);
      }
      offsets.set(partition, BigInt(o));
    }
    return { kind: "offsets", offsets };
  }
  if (/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(t)) {
    const ms = Date.parse(t);
    if (Number.isFinite(ms)) return { kind: "timestamp", ms };
  }
  throw new SluiceError(
    "CONFIG_INVALID",
    `cannot read ${flag} "${text}": use earliest, latest, partition:offset pairs like 0:100,1:250, or an ISO timestamp like 2026-11-30T00:00:00Z`,
  );
}

/** What the broker says about each partition (offsets as decimal strings). */
export interface PartitionBounds {
  partition: number;
  /** Log start offset. */
  low: string;
  /** Last stable offset under read_committed (end of committed data). */
  high: string;
}

/**
 * Resolves two specs into fixed ranges, clamped to [low, high) of each partition. `timestampOffsets`
 * answers a timestamp with the first offset at or after it per partition (admin
 * fetchTopicOffsetsByTimestamp). Pure apart from that callback, so it is unit-tested.
 */
export async function resolveRanges(
  bounds: readonly PartitionBounds[],
  from: OffsetSpec,
  to: OffsetSpec,
  timestampOffsets: (ms: number) => Promise<Map<number, bigint>>,
): Promise<PartitionRange[]> {
  const known = new Set(bounds.map((b) => b.partition));
  for (const spec of [from, to]) {
    if (spec.kind !== "offsets") continue;
    for (const p of spec.offsets.keys()) {
      if (!known.has(p)) {
        throw new SluiceError(
          "CONFIG_INVALID",
          `partition ${p} does not exist; the topic has partitions ${[...known].sort((a, b) => a - b).join(", ")}`,
        );
      }
    }
  }
  const pick = async (spec: OffsetSpec, b: PartitionBounds, fallback: "low" | "high"): Promise<bigint> => {
    switch (spec.kind) {
      case "earliest":
        return BigInt(b.low);
      case "latest":
        return BigInt(b.high);
      case "offsets":
        return spec.offsets.get(b.partition) ?? BigInt(b[fallback]);
      case "timestamp": {
        const map = await timestampOffsets(spec.ms);
        return map.get(b.partition) ?? BigInt(b.high);
      }
    }
  };
  // Naming partitions selects them: `--range 0:100-0:500` means partition 0 only, not "0, plus all of 1".
  const named = new Set<number>();
  for (const spec of [from, to])
    if (spec.kind === "offsets") for (const p of spec.offsets.keys()) named.add(p);
  const ranges: PartitionRange[] = [];
  for (const b of [...bounds].sort((x, y) => x.partition - y.partition)) {
    if (named.size > 0 && !named.has(b.partition)) continue;
    const low = BigInt(b.low);
    const high = BigInt(b.high);
    const clamp = (v: bigint) => (v < low ? low : v > high ? high : v);
    const start = clamp(await pick(from, b, "low"));
    let end = clamp(await pick(to, b, "high"));
    if (end < start) end = start;
    ranges.push({ partition: b.partition, startOffset: start.toString(), endOffset: end.toString() });
  }
  return ranges;
}

/**
 * `--range 0:100-0:500,1:0-1:50` (or the short `0:100-500`): per-partition [start, end) pairs, split
 * into the equivalent `--from` / `--to` specs so the manifest records one canonical form.
 */
export function splitRangeSpec(text: string): { from: string; to: string } {
  const from: string[] = [];
  const to: string[] = [];
  for (const part of text.split(",")) {
    const m = /^(\d+):(\d+)-(?:(\d+):)?(\d+)$/.exec(part.trim());
    if (!m || (m[3] !== undefined && m[3] !== m[1])) {
      throw new SluiceError(
        "CONFIG_INVALID",
        `cannot read --range "${text}": use PARTITION:START-PARTITION:END pairs like 0:100-0:500,1:0-1:50 (end exclusive)`,
      );
    }
    from.push(`${m[1]}:${m[2]}`);
    to.push(`${m[1]}:${m[4]}`);
  }
  return { from: from.join(","), to: to.join(",") };
}
