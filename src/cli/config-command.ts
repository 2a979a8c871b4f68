import type { Command } from "commander";
import { stringify } from "yaml";
import { type DeepPartial, loadConfigWithOrigin } from "../config/config-loader.js";
import type { SluiceConfig, SluiceConfigInput } from "../config/config-schema.js";
import { maskSecrets } from "../config/secret-masking.js";

/**
 * Loads the effective configuration for a command, honouring the global `--config` option; `flags`
 * (the command's own options, as configuration keys) are the last layer and validated with the rest.
 */
export function loadCommandConfig(command: Command, flags?: DeepPartial<SluiceConfigInput>): SluiceConfig {
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
    .action((opts: { json?: boolean }, command: Command) => {
      const { config: path } = command.optsWithGlobals<{ config?: string }>();
      const { config: effective, origin } = loadConfigWithOrigin(
        path === undefined ? {} : { configPath: path },
      );
      const masked = maskSecrets(effective);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(masked, null, 2)}\n`);
        return;
      }
      const header = [`# file: ${origin.file ?? "(none; defaults)"}`];
      for (const [key, source] of origin.env) header.push(`# ${key} from ${source}`);
      process.stdout.write(`${header.join("\n")}\n${stringify(masked)}`);
    });
}
