import type { GroupStatus } from "../observability/group-status.js";

const dash = "-";

function seconds(s: number | null): string {
  if (s === null) return dash;
  if (!Number.isFinite(s)) return String(s);
  return s < 100 ? s.toFixed(1) : s.toFixed(0);
}

function isoTime(ms: number | null): string {
  return ms === null ? dash : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

/** The `sluice status` table, like `kafka-consumer-groups --describe` plus time columns. */
export function formatStatusTable(status: GroupStatus): string {
  const header = [
    "TOPIC",
    "PARTITION",
    "COMMITTED",
    "END",
    "LAG",
    "LAG_SECONDS",
    "FRESHNESS_SECONDS",
    "LAST_COMMITTED_EVENT",
    "COMPLETE_UP_TO",
  ];
  const rows = status.partitions.map((p) => [
    p.topic,
    String(p.partition),
    p.committedOffset ?? dash,
    p.endOffset,
    String(p.lagRecords),
    seconds(p.lagSeconds),
    seconds(p.freshnessSeconds),
    isoTime(p.lastCommittedEventTimestampMs),
    isoTime(p.completeUpToMs),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  const total = status.partitions.reduce((n, p) => n + p.lagRecords, 0);
  return [
    `GROUP ${status.groupId}  sampled ${isoTime(status.sampledAtMs)}  total lag ${total}`,
    "",
    line(header),
    ...rows.map(line),
    "",
  ].join("\n");
}
