import type { Command } from "commander";
import type { DeepPartial } from "../config/config-loader.js";
import type { SluiceConfig, SluiceConfigInput } from "../config/config-schema.js";

/**
 * Loads the effective configuration for a command, honouring the global `--config` option; `flags`
 * (the command's own options, as configuration keys) are the last layer and validated with the rest.
 * Async so that only a command that reads its configuration loads the schema and the YAML parser.
 */
export async function loadCommandConfig(
  command: Command,
  flags?: DeepPartial<SluiceConfigInput>,
): Promise<SluiceConfig> {
  const { loadConfigWithOrigin } = await import("../config/config-loader.js");
  const { config } = command.optsWithGlobals<{ config?: string }>();
  return loadConfigWithOrigin({
    ...(config === undefined ? {} : { configPath: config }),
    ...(flags === undefined ? {} : { overrides: flags }),
  }).config;
}

export function register(program: Command): void {
  const config = program.command("config").description("Inspect the effective configuration");
  config
    .command("print")
    .description("Print the effective configuration (defaults < file < SLUICE_* env) as YAML, secrets masked")
    .option("--json", "print JSON instead of YAML")
    .action(async (opts: { json?: boolean }, command: Command) => {
      const { loadConfigWithOrigin } = await import("../config/config-loader.js");
      const { maskSecrets } = await import("../config/secret-masking.js");
      const { config: path } = command.optsWithGlobals<{ config?: string }>();
      const { config: effective, origin } = loadConfigWithOrigin(
        path === undefined ? {} : { configPath: path },
      );
      const masked = maskSecrets(effective);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(masked, null, 2)}\n`);
        return;
      }
      const { stringify } = await import("yaml");
      const header = [`# file: ${origin.file ?? "(none; defaults)"}`];
      for (const [key, source] of origin.env) header.push(`# ${key} from ${source}`);
      process.stdout.write(`${header.join("\n")}\n${stringify(masked)}`);
    });
}
