import type { Command } from "commander";
import { SluiceError } from "../sluice-error.js";
import { loadCommandConfig } from "./config-command.js";

interface AclsFlags {
  format: string;
  principal?: string;
  command: string;
  createTopics?: boolean;
  batchInput?: string;
  batchOutput?: string;
}

/**
 * The commands the plan knows name `--command`'s choices and default; the plan loads the
 * configuration schema, so they are filled in only when the command line names `acls`.
 */
export async function prepare(acls: Command): Promise<void> {
  const { ACL_COMMANDS } = await import("../app/kafka-acl-plan.js");
  const option = acls.options.find((o) => o.long === "--command");
  if (!option) throw new Error("acls: --command is not declared");
  option.description = `comma-separated commands (${ACL_COMMANDS.join(", ")})`;
  option.default(ACL_COMMANDS.join(","));
  acls.setOptionValueWithSource("command", option.defaultValue, "default");
}

/** `sluice acls`: the minimal Kafka ACLs the configured commands need, ready to apply. */
export function register(program: Command): void {
  program
    .command("acls")
    .description("Print the minimal Kafka ACLs this configuration's serve, status, batch and backfill need")
    .option("--format <format>", "kafka-acls (kafka-acls.sh commands) or json", "kafka-acls")
    .option(
      "--principal <principal>",
      "principal to grant (default: User:<kafka.sasl.username>, else User:sluice)",
    )
    // Its choices and default come from the plan (see prepare).
    .option("--command <list>", "comma-separated commands")
    .option("--create-topics", "also grant CREATE on the topics (only if Sluice is to create missing topics)")
    .option(
      "--batch-input <topic>",
      "Kafka input topic of `sluice batch` (default: the first of topics.requests)",
    )
    .option("--batch-output <topic>", "Kafka output topic of `sluice batch` (default: topics.results)")
    .action(async (flags: AclsFlags, command: Command) => {
      const config = await loadCommandConfig(command);
      const { ACL_COMMANDS, aclPlan, formatKafkaAcls } = await import("../app/kafka-acl-plan.js");
      const commands = flags.command
        .split(",")
        .map((c) => c.trim())
        .filter((c) => c !== "");
      const unknown = commands.filter((c) => !ACL_COMMANDS.includes(c));
      if (unknown.length > 0)
        throw new SluiceError(
          "CONFIG_INVALID",
          `--command ${unknown.join(", ")}: unknown; use ${ACL_COMMANDS.join(", ")}`,
        );
      if (flags.format !== "kafka-acls" && flags.format !== "json")
        throw new SluiceError("CONFIG_INVALID", `--format ${flags.format}: use kafka-acls or json`);
      const principal = flags.principal ?? `User:${config.kafka.sasl?.username ?? "sluice"}`;
      const entries = aclPlan(config, commands, {
        createTopics: flags.createTopics === true,
        ...(flags.batchInput ? { batchInput: flags.batchInput } : {}),
        ...(flags.batchOutput ? { batchOutput: flags.batchOutput } : {}),
      });
      process.stdout.write(
        flags.format === "json"
          ? `${JSON.stringify(
              entries.map((e) => ({ principal, permission: "ALLOW", host: "*", ...e })),
              null,
              2,
            )}\n`
          : formatKafkaAcls(entries, principal, config.kafka.brokers.join(",")),
      );
    });
}
