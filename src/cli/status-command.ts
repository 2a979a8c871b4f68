import type { Command } from "commander";
import type { GroupStatus } from "../observability/group-status.js";
import { SluiceError } from "../sluice-error.js";
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
      const config = await loadCommandConfig(command);
      const { createKafka } = await import("../kafka/client/kafka-client.js");
      const { describeConsumerGroup } = await import("../kafka/probes/consumer-group-state.js");
      const { kafkaLagReaders } = await import("../kafka/probes/kafka-lag-readers.js");
      const { readGroupStatus } = await import("../observability/group-status.js");
      const groupId = flags.group ?? config.consumer.groupId;
      const kafka = createKafka(config.kafka);
      // A group the coordinator does not know has no lag to show: reading offsets would report the
      // whole topic as lag of a group that never ran, which looks like a real, stuck consumer.
      const group = await describeConsumerGroup(kafka, groupId);
      if (group.state === "Dead") {
        const { envNameFor } = await import("../config/env-overrides.js");
        throw new SluiceError(
          "GROUP_NOT_FOUND",
          `consumer group "${groupId}" does not exist on ${config.kafka.brokers.join(",")} (no members, no committed offsets); ` +
            `check --group, or consumer.groupId (${envNameFor("consumer.groupId")}) for the default`,
          { context: { groupId } },
        );
      }
      const readers = kafkaLagReaders(kafka);
      let status: GroupStatus;
      try {
        status = await readGroupStatus({ ...readers, groupId, topics: flags.topic ?? [] });
      } catch (error) {
        // A group that never committed: fall back to the configured request topics.
        if (flags.topic || (error as { code?: string }).code !== "INPUT_INVALID") throw error;
        status = await readGroupStatus({ ...readers, groupId, topics: config.topics.requests });
      }
      const { formatStatusTable } = await import("../app/group-status-table.js");
      process.stdout.write(flags.json ? `${JSON.stringify(status, null, 2)}\n` : formatStatusTable(status));
    });
}
