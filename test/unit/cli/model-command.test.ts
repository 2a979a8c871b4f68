import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { modelRunnerOptionsFrom } from "../../../src/cli/model-command.js";
import { modelRunnerOptionsFromConfig } from "../../../src/model/model-runner-config.js";
import { isSluiceError } from "../../../src/sluice-error.js";
import { configWithEveryModelKey, everyModelKey, fixtureDir } from "../../support/every-model-key.js";

/** A `model info` command under a program whose global `--config` names `file`. */
function commandWithConfig(file: string): Command {
  const program = new Command().option("--config <file>");
  program.setOptionValue("config", file);
  return program.command("info");
}

describe("infer and model info run the model as serve does (the one mapping)", () => {
  it("with the configured model: the settings serve gets, on one worker", async () => {
    const file = join(fixtureDir, "every-key.config.yaml");
    writeFileSync(file, stringify({ model: everyModelKey, batching: { bucketing: false } }));
    const fromCli = await modelRunnerOptionsFrom(commandWithConfig(file), {});
    const fromConfig = await modelRunnerOptionsFromConfig(configWithEveryModelKey(), () => {});
    expect(fromCli).toEqual({ ...fromConfig, workers: 1 });
  });

  it("flags are configuration overrides, validated by the schema; the other keys stay configured", async () => {
    const file = join(fixtureDir, "flags.config.yaml");
    writeFileSync(
      file,
      stringify({ model: { itemIsolation: "always", interOpThreads: 2, allowSpinning: true } }),
    );
    const other = join(fixtureDir, "other.onnx");
    writeFileSync(other, "x");
    writeFileSync(join(fixtureDir, "tokenizer.json"), "{}");
    const fromCli = await modelRunnerOptionsFrom(commandWithConfig(file), {
      model: other,
      task: "classification",
      labels: "a, b",
    });
    expect(fromCli).toMatchObject({
      modelPath: other,
      tokenizerPath: join(fixtureDir, "tokenizer.json"),
      name: "other",
      task: "classification",
      labels: ["a", "b"],
      itemIsolation: "always",
      interOpThreads: 2,
      allowSpinning: true,
      workers: 1,
    });
    const error = await modelRunnerOptionsFrom(commandWithConfig(file), {
      model: other,
      task: "regression",
    }).catch((e: unknown) => e);
    expect(isSluiceError(error, "CONFIG_INVALID")).toBe(true);
    expect((error as Error).message).toContain('model.task = "regression" (from command-line option)');
  });
});
