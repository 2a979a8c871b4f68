import type { Command } from "commander";
import { createKafka } from "../kafka/kafka-client.js";
import { type GroupStatus, readGroupStatus } from "../observability/group-status.js";
import { loadCommandConfig } from "./config-command.js";

interface StatusFlags {
  group?: string;
  topic?: string[];
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command("status")
    .description(
      "Per topic-partition committed offset, end offset, lag (records, seconds) and freshness of a consumer group, read from the broker",
    )
    .option("-g, --group <id>", "consumer group (default: consumer.groupId from the configuration)")
    .option(
      "-t, --topic <topic...>",
      "topics to report (default: the group's committed topics, else topics.requests)",
    )
    .option("--json", "print JSON instead of a table")
    .action(async (flags: StatusFlags, command: Command) => {
      const config = loadCommandConfig(command);
      const groupId = flags.group ?? config.consumer.groupId;
      const kafka = createKafka(config.kafka);
      let status: GroupStatus;
      try {
        status = await readGroupStatus({ kafka, groupId, topics: flags.topic ?? [] });
      } catch (error) {
        // A group that never committed: fall back to the configured request topics.
        if (flags.topic || (error as { code?: string }).code !== "INPUT_INVALID") throw error;
        status = await readGroupStatus({ kafka, groupId, topics: config.topics.requests });
      }
      process.stdout.write(flags.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatusTable(status));
    });
}

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
